// An all-reduce (sum of floats) over a weft::Group: a reduce-scatter, then an all-gather,
// each step an RMA write with a notification to its target. Two schedules move the same
// bytes in different numbers of steps:
//   - ring: n-1 steps each way, always to the right neighbour. In the reduce-scatter a
//     rank writes its partial chunk into the right one's staging slot for that step and
//     adds what the left one wrote into its own; in the all-gather it writes a finished
//     chunk straight into the right one's data. With set_piece(), chunks go in pieces,
//     each passed on as soon as it is in, so that adding overlaps the wire (where the
//     wire, not the CPU, is what takes the time: on 2 shared cores whole chunks measured
//     faster).
//   - halving (Rabenseifner's recursive halving and doubling): log2 p steps each way among
//     p ranks, p a power of two, with the rank at distance p/2, p/4, ..., 1. Each
//     reduce-scatter step halves the range a rank sums: it writes the other half into that
//     partner's staging and adds the partner's copy of its own half. The all-gather
//     retraces the steps, each writing the range summed so far straight into the
//     partner's data, the range doubling every step. Where n is not a power of two, the
//     first 2 (n - p) ranks pair up first: the even one of each pair writes its data into
//     the odd one's, which adds it and takes part for both, and writes the sum back at the
//     end. Where ranks outnumber cores every step is a round of the scheduler, so fewer
//     steps win; Open MPI picks this schedule at these sizes too.
// Every rank holds the sum at the end.
#pragma once

#include <weft/groups/group.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

class Allreduce {
public:
    enum class Schedule { ring, halving };
    /// The ring for 3 ranks, else halving: at 1 MiB halving was as fast or faster on 4-8
    /// ranks here, the ring on 3 (bench/README.md; at 16-64 MiB the ring often led).
    static Schedule best(std::uint32_t ranks) { return ranks == 3 ? Schedule::ring : Schedule::halving; }

    /// For up to `max_floats` floats; collective: every rank makes one with the same
    /// `max_floats` and schedule (staging offsets follow from them; a rank whose staging
    /// differs is refused). While run() goes, the Node's notifications are this object's:
    /// receive() keeps every one it meets.
    Allreduce(weft::Group& g, std::size_t max_floats, Schedule schedule, weft::Deadline deadline)
        : g_(g), n_(g.size()), me_(g.rank()), p_(std::bit_floor(n_)), max_(max_floats)
        , schedule_(schedule)
        , data_(g.node().allocate(std::max<std::size_t>(max_floats, 1) * sizeof(float),
                                  weft::Access::remote_write))
        , staging_(g.node().allocate((staging_floats() + 1) * sizeof(float), weft::Access::remote_write))
    {
        if (schedule_ == Schedule::ring && n_ > 2049)
            throw std::invalid_argument("the ring's tags have room for 2049 ranks: use halving");
        if (n_ == 1)
            return;
        datas_ = g.all_gather(data_->remote(), deadline);
        stagings_ = g.all_gather(staging_->remote(), deadline);
        for (const weft::RemoteRegion& r : stagings_)
            if (r.length() != stagings_[me_].length())
                throw std::invalid_argument("the ranks made their Allreduce with different sizes "
                                            "or schedules: every rank passes the same");
        for (std::uint32_t r = 0; r < n_; ++r)
            peers_.push_back(r == me_ ? weft::PeerId{} : g.peer(r));
        if (schedule_ == Schedule::ring) {
            g.connect(weft::Topology::ring, deadline);
            return;
        }
        std::vector<weft::PeerId> partners;
        if (paired())
            partners.push_back(peers_[me_ ^ 1]);
        if (const auto v = vrank())
            for (std::uint32_t d = 1; d < p_; d *= 2)
                partners.push_back(peers_[real(*v ^ d)]);
        g.node().connect(partners, deadline);
    }

    /// The buffer to reduce in place: fill its first `count` floats, then run(count).
    float* data() { return reinterpret_cast<float*>(data_->data()); }

    /// Sums every rank's data()[0..count) into every rank's; collective.
    void run(std::size_t count, weft::Deadline deadline)
    {
        if (count > max_)
            throw std::invalid_argument("more floats than this Allreduce was made for");
        if (n_ == 1 || count == 0)
            return;
        ++iteration_;
        if (schedule_ == Schedule::ring)
            ring(count, deadline);
        else
            halving(count, deadline);
        while (in_flight_ > 0) {
            (void)g_.node().wait(&sent_, deadline);
            --in_flight_;
        }
    }

    /// Floats per piece (the unit the ring sends on as soon as it is in); 0: whole chunks.
    void set_piece(std::size_t floats) { piece_ = floats ? floats : SIZE_MAX / 2; }

private:
    using Range = std::pair<std::size_t, std::size_t>; // floats [first, second)

    void ring(std::size_t count, weft::Deadline deadline)
    {
        const std::uint32_t right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
        const std::size_t chunk = (count + n_ - 1) / n_;
        const std::uint32_t pieces =
            static_cast<std::uint32_t>(std::clamp<std::size_t>((chunk + piece_ - 1) / piece_, 1, 4095));
        const std::size_t per = (chunk + pieces - 1) / pieces;
        float* d = data();
        const float* staging = reinterpret_cast<const float*>(staging_->data());
        // Piece p of chunk c into the right one's staging slot for step s (at the piece's
        // place in the chunk) or, a sum, into its data.
        const auto to_slot = [&](std::uint32_t c, std::uint32_t p, std::uint32_t s) {
            const Range r = piece(count, c, p, per);
            send(right, r, stagings_[right], s * chunk_max() + r.first - begin(count, c), tag(0, s, p),
                 deadline);
        };
        const auto to_data = [&](std::uint32_t c, std::uint32_t p, std::uint32_t s) {
            const Range r = piece(count, c, p, per);
            send(right, r, datas_[right], r.first, tag(1, s, p), deadline);
        };
        for (std::uint32_t p = 0; p < pieces; ++p) // reduce-scatter step 0: this rank's chunk as it is
            to_slot(me_, p, 0);
        for (std::uint32_t s = 0; s + 1 < n_; ++s) {
            const std::uint32_t in = (me_ + n_ - s - 1) % n_; // the chunk the left one sends
            for (std::uint32_t p = 0; p < pieces; ++p) {
                receive(left, tag(0, s, p), deadline);
                const auto [from, to] = piece(count, in, p, per);
                add_into(d + from, staging + s * chunk_max() + from - begin(count, in), to - from);
                if (s + 2 < n_) // on into the right one's next slot
                    to_slot(in, p, s + 1);
                else // the sum: the all-gather's first step
                    to_data(in, p, 0);
            }
        }
        for (std::uint32_t s = 0; s + 2 < n_; ++s) { // all-gather: pass each sum on
            const std::uint32_t in = (me_ + n_ - s) % n_;
            for (std::uint32_t p = 0; p < pieces; ++p) {
                receive(left, tag(1, s, p), deadline);
                to_data(in, p, s + 1);
            }
        }
        for (std::uint32_t p = 0; p < pieces; ++p)
            receive(left, tag(1, n_ - 2, p), deadline);
    }

    void halving(std::size_t count, weft::Deadline deadline)
    {
        float* d = data();
        const float* staging = reinterpret_cast<const float*>(staging_->data());
        const Range all{0, count};
        const auto v = vrank();
        if (!v) { // the even one of a pair: its data to the odd one, the sum back from it
            send(me_ + 1, all, stagings_[me_ + 1], fold_at(), tag(0, fold_step, 0), deadline);
            receive(me_ + 1, tag(1, fold_step, 0), deadline);
            return;
        }
        if (paired()) { // the odd one: adds its pair's data first
            receive(me_ - 1, tag(0, fold_step, 0), deadline);
            add_into(d, staging + fold_at(), count);
        }
        // This rank's range, in blocks of ceil(count / p) floats: [lo, lo + len). Each step's partner
        // works on the same range, and the step's staging slot is at the same place in both.
        std::uint32_t lo = 0, len = p_, step = 0;
        std::size_t slot = 0;
        for (std::uint32_t dist = p_ / 2; dist > 0; dist /= 2, ++step) { // reduce-scatter
            const std::uint32_t partner = real(*v ^ dist), half = len / 2;
            const bool upper = (*v & dist) != 0;
            const std::uint32_t keep = upper ? lo + half : lo, give = upper ? lo : lo + half;
            send(partner, blocks(count, give, half), stagings_[partner], slot, tag(0, step, 0),
                 deadline);
            receive(partner, tag(0, step, 0), deadline);
            const auto [from, to] = blocks(count, keep, half);
            add_into(d + from, staging + slot, to - from);
            lo = keep;
            len = half;
            slot += half * block_max();
        }
        // All-gather, back the same way: a partner writes only into the range this rank
        // gave it in the reduce-scatter, and only after it had read it.
        for (std::uint32_t dist = 1; dist < p_; dist *= 2, ++step) {
            const std::uint32_t partner = real(*v ^ dist);
            const Range mine = blocks(count, lo, len);
            send(partner, mine, datas_[partner], mine.first, tag(1, step, 0), deadline);
            receive(partner, tag(1, step, 0), deadline);
            if (*v & dist)
                lo -= len;
            len *= 2;
        }
        if (paired()) // the sum to the pair's even one
            send(me_ - 1, all, datas_[me_ - 1], 0, tag(1, fold_step, 0), deadline);
    }

    /// This rank's place among the p ranks that halve and double: none for the even one
    /// of a pair (ranks below 2 (n - p) pair up), the odd one taking part for both.
    std::optional<std::uint32_t> vrank() const
    {
        if (paired())
            return me_ % 2 ? std::optional(me_ / 2) : std::nullopt;
        return me_ - (n_ - p_);
    }
    /// One of the first 2 (n - p) ranks, which pair up.
    bool paired() const { return me_ < 2 * (n_ - p_); }
    std::uint32_t real(std::uint32_t v) const { return v < n_ - p_ ? 2 * v + 1 : v + (n_ - p_); }
    /// halving: blocks [first, first + n) of p, in floats.
    Range blocks(std::size_t count, std::uint32_t first, std::uint32_t n) const
    {
        return {edge(count, p_, first), edge(count, p_, first + n)};
    }
    std::size_t block_max() const { return share(max_, p_); }
    /// Where an odd one of a pair takes its pair's data: past the halving's slots
    /// (p/2 + p/4 + ... + 1 blocks), which its partners may write into meanwhile.
    std::size_t fold_at() const { return (p_ - 1) * block_max(); }
    /// Staging: the ring's slot per step (n - 1 chunks), or the halving's slots and the
    /// pair's data; and past it, a float for notifications of empty ranges.
    std::size_t staging_floats() const
    {
        if (schedule_ == Schedule::ring)
            return (n_ - 1) * chunk_max();
        return fold_at() + (n_ > p_ ? max_ : 0);
    }
    static constexpr std::uint32_t fold_step = 0x7ff; // the tags' step of the pairs' writes

    /// d[i] += a[i]: a loop GCC vectorizes (examples/CMakeLists.txt: the applications'
    /// cost model); left scalar, the sums took a third of a 1 MiB call on shm.
    static void add_into(float* d, const float* a, std::size_t n)
    {
        for (std::size_t i = 0; i < n; ++i)
            d[i] += a[i];
    }

    /// Floats in each of `parts` equal shares of `total` (the last may be shorter).
    static std::size_t share(std::size_t total, std::uint32_t parts) { return (total + parts - 1) / parts; }
    /// The first float of share `i` of `count` in `parts` (count, past the last).
    static std::size_t edge(std::size_t count, std::uint32_t parts, std::uint32_t i)
    {
        return std::min(count, i * share(count, parts));
    }
    std::size_t chunk_max() const { return share(max_, n_); }
    /// ring: the first float of chunk `chunk` of n.
    std::size_t begin(std::size_t count, std::uint32_t chunk) const { return edge(count, n_, chunk); }
    /// Piece `p` (`per` floats) of chunk `chunk`; empty past the chunk's end.
    Range piece(std::size_t count, std::uint32_t chunk, std::uint32_t p, std::size_t per) const
    {
        const std::size_t end = begin(count, chunk + 1);
        const std::size_t from = std::min(begin(count, chunk) + p * per, end);
        return {from, std::min(from + per, end)};
    }
    std::uint32_t tag(std::uint32_t phase, std::uint32_t step, std::uint32_t piece) const
    {
        return (iteration_ & 0xffu) << 24 | phase << 23 | step << 12 | piece;
    }

    /// data()'s floats `r` to rank `to`'s region `dst` at `at` floats, notifying `tag`.
    void send(std::uint32_t to, Range r, const weft::RemoteRegion& dst, std::size_t at,
              std::uint32_t tag, weft::Deadline deadline)
    {
        if (in_flight_ == window) { // waits for the oldest few, not for each
            (void)g_.node().wait(&sent_, deadline);
            --in_flight_;
        }
        if (r.second == r.first) { // an empty range (count < n): the notification alone, with 4 bytes
            const weft::RemoteRegion& spare = stagings_[to];
            g_.node().write_notify(peers_[to], data_->slice(0, sizeof(float)), spare,
                                   spare.length() - sizeof(float), tag, &sent_);
        } else {
            g_.node().write_notify(peers_[to],
                                   data_->slice(r.first * sizeof(float), (r.second - r.first) * sizeof(float)),
                                   dst, at * sizeof(float), tag, &sent_);
        }
        ++in_flight_;
    }

    /// Waits for rank `from`'s notification `tag` (others met first are kept).
    void receive(std::uint32_t from, std::uint32_t tag, weft::Deadline deadline)
    {
        while (!early_.erase(tag))
            early_.insert(g_.node().wait_for(weft::Op::notify, peers_[from], deadline).data);
    }

    static constexpr unsigned window = 16; // writes in flight at most
    weft::Group& g_;
    std::uint32_t n_, me_, p_; // ranks, this one, the power of two that halving takes
    std::size_t max_;
    Schedule schedule_;
    std::shared_ptr<weft::MemoryRegion> data_, staging_;
    std::vector<weft::PeerId> peers_;                  // by rank (this one's unused)
    std::vector<weft::RemoteRegion> datas_, stagings_; // by rank
    std::uint32_t iteration_ = 0;
    std::multiset<std::uint32_t> early_;
    int sent_ = 0;
    unsigned in_flight_ = 0;
    std::size_t piece_ = SIZE_MAX / 2; // floats: whole chunks
};
