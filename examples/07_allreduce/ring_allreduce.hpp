// A ring all-reduce (sum of floats) over a weft::Group: reduce-scatter, then all-gather,
// each n-1 steps of one RMA write with a notification to the right neighbour. In the
// reduce-scatter a rank writes its partial chunk into the right one's staging slot for
// that step and adds what the left one wrote into its own; in the all-gather it writes a
// finished chunk straight into the right one's data. Every rank holds the sum at the end.
#pragma once

#include <weft/group.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <span>
#include <stdexcept>

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
        float* d = data();
        const float* staging = reinterpret_cast<const float*>(staging_->data());
        for (std::uint32_t s = 0; s + 1 < n_; ++s) { // reduce-scatter
            const std::uint32_t out = (me_ + n_ - s) % n_, in = (me_ + n_ - s - 1) % n_;
            send(count, out, right_staging_, s * chunk_max() * sizeof(float), tag(0, s), deadline);
            receive(tag(0, s), deadline);
            const float* add = staging + s * chunk_max();
            for (std::size_t i = begin(count, in), k = 0; i < begin(count, in + 1); ++i, ++k)
                d[i] += add[k];
        }
        for (std::uint32_t s = 0; s + 1 < n_; ++s) { // all-gather
            const std::uint32_t out = (me_ + 1 + n_ - s) % n_;
            send(count, out, right_data_, begin(count, out) * sizeof(float), tag(1, s), deadline);
            receive(tag(1, s), deadline);
        }
    }

private:
    std::size_t chunk_max() const { return (max_ + n_ - 1) / n_; }
    std::size_t begin(std::size_t count, std::uint32_t chunk) const
    {
        return std::min(count, chunk * ((count + n_ - 1) / n_));
    }
    std::uint32_t tag(std::uint32_t phase, std::uint32_t step) const
    {
        return (iteration_ & 0xffffu) << 16 | phase << 15 | step;
    }

    /// Chunk `chunk` of data() to the right neighbour's `dst` at `offset`, waited for.
    void send(std::size_t count, std::uint32_t chunk, const weft::RemoteRegion& dst,
              std::uint64_t offset, std::uint32_t tag, weft::Deadline deadline)
    {
        const std::size_t from = begin(count, chunk), to = begin(count, chunk + 1);
        if (to == from) { // an empty chunk (count < n): the notification alone, with 4 bytes
            g_.node().write_notify(right_, data_->slice(0, sizeof(float)), right_staging_,
                                   right_staging_.length() - sizeof(float), tag, &sent_);
        } else {
            g_.node().write_notify(right_, data_->slice(from * sizeof(float), (to - from) * sizeof(float)),
                                   dst, offset, tag, &sent_);
        }
        (void)g_.node().wait(&sent_, deadline);
    }

    /// Waits for the left neighbour's notification `tag` (others met first are kept).
    void receive(std::uint32_t tag, weft::Deadline deadline)
    {
        while (!early_.erase(tag))
            early_.insert(g_.node().wait_for(weft::Op::notify, left_, deadline).data);
    }

    weft::Group& g_;
    std::uint32_t n_, me_;
    std::size_t max_;
    std::shared_ptr<weft::MemoryRegion> data_, staging_;
    weft::PeerId right_, left_;
    weft::RemoteRegion right_data_, right_staging_;
    std::uint32_t iteration_ = 0;
    std::multiset<std::uint32_t> early_;
    int sent_ = 0;
};
