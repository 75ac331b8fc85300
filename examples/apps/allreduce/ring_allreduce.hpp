// A ring all-reduce (sum of floats) over a weft::Group: reduce-scatter, then all-gather,
// each n-1 steps of RMA writes with a notification to the right neighbour. In the
// reduce-scatter a rank writes its partial chunk into the right one's staging slot for
// that step and adds what the left one wrote into its own; in the all-gather it writes a
// finished chunk straight into the right one's data. With set_piece(), chunks go in
// pieces, each passed on as soon as it is in, so that adding overlaps the wire (where the
// wire, not the CPU, is what takes the time: on 2 shared cores whole chunks measured
// faster). Every rank holds the sum at the end.
#pragma once

#include <weft/group.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>

class RingAllreduce {
public:
    /// For up to `max_floats` floats; collective (every rank makes one).
    RingAllreduce(weft::Group& g, std::size_t max_floats, weft::Deadline deadline)
        : g_(g), n_(g.size()), me_(g.rank()), max_(max_floats)
        , data_(g.node().allocate(std::max<std::size_t>(max_floats, 1) * sizeof(float),
                                  weft::Access::remote_write))
        // A slot per reduce-scatter step, and a float for notifications of empty chunks.
        , staging_(g.node().allocate(((n_ - 1) * chunk_max() + 1) * sizeof(float),
                                     weft::Access::remote_write))
    {
        if (n_ == 1)
            return;
        right_ = g.peer((me_ + 1) % n_);
        left_ = g.peer((me_ + n_ - 1) % n_);
        const auto datas = g.all_gather(data_->remote(), deadline);
        const auto stagings = g.all_gather(staging_->remote(), deadline);
        right_data_ = datas[(me_ + 1) % n_];
        right_staging_ = stagings[(me_ + 1) % n_];
        g.connect(weft::Topology::ring, deadline);
    }

    /// The buffer to reduce in place: fill its first `count` floats, then run(count).
    float* data() { return reinterpret_cast<float*>(data_->data()); }

    /// Sums every rank's data()[0..count) into every rank's; collective.
    void run(std::size_t count, weft::Deadline deadline)
    {
        if (count > max_)
            throw std::invalid_argument("more floats than this RingAllreduce was made for");
        if (n_ == 1 || count == 0)
            return;
        ++iteration_;
        // Chunks go in pieces, each sent on as soon as it is in: the wire carries one piece
        // while this rank adds the next.
        const std::size_t chunk = (count + n_ - 1) / n_;
        const std::uint32_t pieces =
            static_cast<std::uint32_t>(std::clamp<std::size_t>((chunk + piece_ - 1) / piece_, 1, 4095));
        const std::size_t per = (chunk + pieces - 1) / pieces;
        float* d = data();
        const float* staging = reinterpret_cast<const float*>(staging_->data());
        for (std::uint32_t p = 0; p < pieces; ++p) // reduce-scatter step 0: this rank's chunk as it is
            send(count, me_, p, per, right_staging_, 0, tag(0, 0, p), deadline);
        for (std::uint32_t s = 0; s + 1 < n_; ++s) {
            const std::uint32_t in = (me_ + n_ - s - 1) % n_; // the chunk the left one sends
            for (std::uint32_t p = 0; p < pieces; ++p) {
                receive(tag(0, s, p), deadline);
                const auto [from, to] = piece(count, in, p, per);
                add_into(d + from, staging + s * chunk_max() + p * per, to - from);
                if (s + 2 < n_) // on into the right one's next slot
                    send(count, in, p, per, right_staging_, (s + 1) * chunk_max(), tag(0, s + 1, p),
                         deadline);
                else // the sum: the all-gather's first step
                    send(count, in, p, per, right_data_, begin(count, in), tag(1, 0, p), deadline);
            }
        }
        for (std::uint32_t s = 0; s + 2 < n_; ++s) { // all-gather: pass each sum on
            const std::uint32_t in = (me_ + n_ - s) % n_;
            for (std::uint32_t p = 0; p < pieces; ++p) {
                receive(tag(1, s, p), deadline);
                send(count, in, p, per, right_data_, begin(count, in), tag(1, s + 1, p), deadline);
            }
        }
        for (std::uint32_t p = 0; p < pieces; ++p)
            receive(tag(1, n_ - 2, p), deadline);
        while (in_flight_ > 0) {
            (void)g_.node().wait(&sent_, deadline);
            --in_flight_;
        }
    }

    /// Floats per piece (the unit sent on as soon as it is in); 0: whole chunks.
    void set_piece(std::size_t floats) { piece_ = floats ? floats : SIZE_MAX / 2; }

private:
    /// d[i] += a[i]: a loop GCC vectorizes (examples/CMakeLists.txt: the applications'
    /// cost model); left scalar, the sums took a third of a 1 MiB call on shm.
    static void add_into(float* d, const float* a, std::size_t n)
    {
        for (std::size_t i = 0; i < n; ++i)
            d[i] += a[i];
    }

    std::size_t chunk_max() const { return (max_ + n_ - 1) / n_; }
    std::size_t begin(std::size_t count, std::uint32_t chunk) const
    {
        return std::min(count, chunk * ((count + n_ - 1) / n_));
    }
    /// [from, to) of piece `p` (`per` floats) of chunk `chunk`; empty past the chunk's end.
    std::pair<std::size_t, std::size_t> piece(std::size_t count, std::uint32_t chunk,
                                              std::uint32_t p, std::size_t per) const
    {
        const std::size_t end = begin(count, chunk + 1);
        const std::size_t from = std::min(begin(count, chunk) + p * per, end);
        return {from, std::min(from + per, end)};
    }
    std::uint32_t tag(std::uint32_t phase, std::uint32_t step, std::uint32_t piece) const
    {
        return (iteration_ & 0xffu) << 24 | phase << 23 | step << 12 | piece;
    }

    /// Piece `p` (`per` floats) of chunk `chunk` of data() to the right neighbour's `dst`,
    /// at `at` floats plus the piece's place in the chunk.
    void send(std::size_t count, std::uint32_t chunk, std::uint32_t p, std::size_t per,
              const weft::RemoteRegion& dst, std::size_t at, std::uint32_t tag,
              weft::Deadline deadline)
    {
        if (in_flight_ == window) { // waits for the oldest few, not for each
            (void)g_.node().wait(&sent_, deadline);
            --in_flight_;
        }
        const auto [from, to] = piece(count, chunk, p, per);
        if (to == from) { // an empty piece (count < n): the notification alone, with 4 bytes
            g_.node().write_notify(right_, data_->slice(0, sizeof(float)), right_staging_,
                                   right_staging_.length() - sizeof(float), tag, &sent_);
        } else {
            g_.node().write_notify(right_, data_->slice(from * sizeof(float), (to - from) * sizeof(float)),
                                   dst, (at + from - begin(count, chunk)) * sizeof(float), tag,
                                   &sent_);
        }
        ++in_flight_;
    }

    /// Waits for the left neighbour's notification `tag` (others met first are kept).
    void receive(std::uint32_t tag, weft::Deadline deadline)
    {
        while (!early_.erase(tag))
            early_.insert(g_.node().wait_for(weft::Op::notify, left_, deadline).data);
    }

    static constexpr unsigned window = 16; // writes in flight at most
    weft::Group& g_;
    std::uint32_t n_, me_;
    std::size_t max_;
    std::shared_ptr<weft::MemoryRegion> data_, staging_;
    weft::PeerId right_, left_;
    weft::RemoteRegion right_data_, right_staging_;
    std::uint32_t iteration_ = 0;
    std::multiset<std::uint32_t> early_;
    int sent_ = 0;
    unsigned in_flight_ = 0;
    std::size_t piece_ = SIZE_MAX / 2; // floats: whole chunks
};
