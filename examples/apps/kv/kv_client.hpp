// The KV node's client: GET is RMA reads of the key's slots (torn copies read again; small
// slots two at a time, the key's and the next, so a key one past its home costs no second
// round trip), starting where the key was last found (DrTM's location cache: a key past its
// home costs one read, not one a slot). PUT and DELETE are requests written into the
// server's memory with a notification, answered by a message. Up to depth() operations run
// at once, one per lane.
// GETs started before the next poll() go out together: up to read_ranges_limit() of them
// as one read (Node::read_ranges), which tcp carries as one message each way, as Redis's
// pipelining batches commands (not on shm, where such a read waits for the server).
#pragma once

#include "kv.hpp"

#include <algorithm>
#include <bit>
#include <deque>
#include <exception>
#include <stdexcept>
#include <vector>

namespace kv {

enum class Kind : std::uint8_t { get, put, erase };

class Client {
public:
    struct Done {
        std::uint32_t lane = 0;
        Kind kind = Kind::get;
        Status status = Status::ok;
        std::span<const std::byte> value; ///< get: valid until the lane's next operation
    };

    Client(std::string_view server, weft::Deadline deadline, const weft::Options& options = {})
        : c_(weft::Connection::connect(server, options, deadline))
        , h_(Hello::decode(c_.side().receive(deadline)))
        , span_(h_.g.slot_size() <= 1024 ? 2 : 1) // a second small slot costs no time
        , copies_(c_.allocate(h_.g.depth * span_ * h_.g.slot_size(), weft::Access::local))
        , requests_(c_.allocate(h_.g.depth * h_.g.request_size(), weft::Access::local))
        , lanes_(h_.g.depth)
        , batches_(h_.g.depth)
        , batch_max_(c_.domain()->quirks().ranges_wait_for_target // shm: one range a read is faster
                         ? 1
                         : std::min<std::size_t>(c_.read_ranges_limit(), max_batch))
    {
        pending_.reserve(h_.g.depth);
        for (std::uint32_t i = 0; i < h_.g.depth; ++i)
            free_.push_back(&batches_[i]);
    }

    std::uint32_t depth() const { return h_.g.depth; }
    const Geometry& geometry() const { return h_.g; }
    weft::Connection& connection() { return c_; }
    std::uint64_t torn() const { return torn_; } ///< copies read again, torn by a rewrite
    std::uint64_t reads() const { return reads_; } ///< GETs' reads of slots (a read of several ranges: each)

    /// Posted at the next poll(), with the other GETs started before it.
    void start_get(std::uint32_t lane, std::string_view key)
    {
        Lane& l = take(lane, Kind::get, key);
        l.hash = hash(l.key);
        l.probe = places_.find(l.hash);
        l.guessed = l.probe != 0;
        read_slot(lane);
    }
    void start_put(std::uint32_t lane, std::string_view key, std::span<const std::byte> value)
    {
        if (value.size() > h_.g.value_max)
            throw std::invalid_argument("a value of " + std::to_string(value.size()) +
                                        " B is over the server's " + std::to_string(h_.g.value_max));
        request(take(lane, Kind::put, key), lane, Op::put, value);
    }
    void start_erase(std::uint32_t lane, std::string_view key)
    {
        request(take(lane, Kind::erase, key), lane, Op::erase, {});
    }

    /// The operations done since the last call (at most out.size()); first posts the
    /// GETs' reads started since.
    std::size_t poll(std::span<Done> out)
    {
        flush();
        std::array<weft::Completion, 16> got;
        const std::size_t n = c_.node().poll(std::span(got).first(std::min(got.size(), out.size())));
        std::size_t done = 0;
        for (const weft::Completion& c : std::span(got).first(n)) {
            if (c.op == weft::Op::recv && c.message.size() == sizeof(Reply)) {
                Reply r;
                std::memcpy(&r, c.message.data(), sizeof r);
                if (r.lane < lanes_.size() && lanes_[r.lane].busy)
                    out[done++] = finish(r.lane, r.status);
            } else if (c.op == weft::Op::read) {
                // Each lane of the batch has its copies: look at them all (a lane
                // done, or read again), keeping what does not fit in `out`. The
                // batch is free again first: look() may throw for one lane.
                Batch* b = static_cast<Batch*>(c.context);
                const Batch lanes = *b;
                free_.push_back(b);
                std::exception_ptr first;
                for (std::uint32_t i = 0; i < lanes.n; ++i) {
                    try {
                        if (auto d = look(lanes.lanes[i]))
                            ready_.push_back(*d);
                    } catch (...) { // the batch's other lanes still go on
                        if (!first)
                            first = std::current_exception();
                    }
                }
                if (first)
                    std::rethrow_exception(first);
            }
        }
        while (done < out.size() && !ready_.empty()) {
            out[done++] = ready_.front();
            ready_.pop_front();
        }
        return done;
    }

    // One operation at a time, waited for (no other lane in flight).
    std::optional<std::vector<std::byte>> get(std::string_view key, weft::Deadline deadline)
    {
        start_get(0, key);
        const Done d = wait(deadline);
        if (d.status != Status::ok)
            return std::nullopt;
        return std::vector<std::byte>(d.value.begin(), d.value.end());
    }
    Status put(std::string_view key, std::span<const std::byte> value, weft::Deadline deadline)
    {
        start_put(0, key, value);
        return wait(deadline).status;
    }
    Status erase(std::string_view key, weft::Deadline deadline)
    {
        start_erase(0, key);
        return wait(deadline).status;
    }

private:
    struct Lane {
        Kind kind = Kind::get;
        bool busy = false;
        std::string key;
        std::uint64_t hash = 0;  // get: the key's
        std::uint32_t probe = 0; // slots looked at past the key's home
        std::uint32_t tries = 0; // torn copies of the current slot
        bool guessed = false;    // get: started where the key was last found, not at its home
    };

    /// Where keys were last found past their home, direct-mapped by the hash multiplied
    /// again (its low bits are the home, keys crowded around one home would share an entry;
    /// bits 40 and up pick the load's shard): a GET's guess of
    /// where to start. Only a guess: a copy there that does not hold the key (moved, deleted,
    /// another key's) sends the GET back to the key's home. The server keeps one full slot a
    /// key (a PUT rewrites the key's slot in place), so a whole copy that holds it is its value.
    class Places {
    public:
        explicit Places(std::uint32_t slots)
            : e_(std::bit_ceil(std::clamp(slots, 1u << 10, 1u << 16)))
            , shift_(64 - std::countr_zero(e_.size()))
        {
        }
        std::uint32_t find(std::uint64_t hash) const
        {
            const Entry& e = e_[at(hash)];
            return e.hash == hash ? e.probe : 0;
        }
        /// The key was found `probe` slots past its home (0: at home, nothing to keep).
        void keep(std::uint64_t hash, std::uint32_t probe)
        {
            Entry& e = e_[at(hash)];
            if (probe != 0)
                e = {hash, probe};
            else if (e.hash == hash)
                e = {};
        }

    private:
        struct Entry {
            std::uint64_t hash = 0;
            std::uint32_t probe = 0;
        };
        std::size_t at(std::uint64_t hash) const { return (hash * 0x9e3779b97f4a7c15ull) >> shift_; }
        std::vector<Entry> e_;
        int shift_; // the product's top bits index e_
    };

    Lane& take(std::uint32_t lane, Kind kind, std::string_view key)
    {
        if (lane >= lanes_.size() || lanes_[lane].busy)
            throw std::logic_error("lane " + std::to_string(lane) + " is busy or out of range");
        if (key.empty() || key.size() > h_.g.key_max)
            throw std::invalid_argument("a key of 1 to " + std::to_string(h_.g.key_max) + " bytes");
        Lane& l = lanes_[lane];
        std::string reused = std::move(l.key); // its capacity: no allocation per operation
        reused.assign(key);
        l = Lane{kind, true, std::move(reused)};
        return l;
    }
    std::byte* copy(std::uint32_t lane, std::uint32_t i)
    {
        return copies_->data() + (lane * span_ + i) * h_.g.slot_size();
    }
    /// The slot the lane's next read starts at, and how many it brings: span_, fewer at
    /// the table's end.
    std::uint64_t slot(const Lane& l) const { return (l.hash + l.probe) % h_.g.slots; }
    std::uint32_t reach(const Lane& l) const
    {
        return static_cast<std::uint32_t>(std::min<std::uint64_t>(span_, h_.g.slots - slot(l)));
    }

    /// The lane's next read, posted by the next flush().
    void read_slot(std::uint32_t lane) { pending_.push_back(lane); }

    /// Posts the pending reads, batch_max_ lanes to a read (one: a plain read).
    /// A post that throws leaves its lanes and those after it pending.
    void flush()
    {
        std::size_t at = 0;
        try {
            while (at < pending_.size()) {
                if (free_.empty()) // a lane is in one read at most: cannot happen
                    throw std::logic_error("kv::Client: more reads than lanes");
                Batch* b = free_.back();
                std::array<weft::Endpoint::Read, max_batch> reads;
                b->n = static_cast<std::uint32_t>(std::min(batch_max_, pending_.size() - at));
                for (std::uint32_t i = 0; i < b->n; ++i) {
                    const std::uint32_t lane = pending_[at + i];
                    const Lane& l = lanes_[lane];
                    b->lanes[i] = lane;
                    reads[i] = {copies_->slice(lane * span_ * h_.g.slot_size(), reach(l) * h_.g.slot_size()),
                                slot(l) * h_.g.slot_size()};
                }
                if (b->n == 1) // the plain read: no arrays for the provider to walk
                    c_.read(reads[0].dst, h_.table, reads[0].offset, b);
                else
                    c_.read_ranges(std::span(reads).first(b->n), h_.table, b);
                free_.pop_back(); // posted: its completion gives it back
                at += b->n;
                reads_ += b->n;
            }
        } catch (...) {
            pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(at));
            throw;
        }
        pending_.clear();
    }

    /// A GET's copies arrived: done, or the slots after them, or from the torn one again.
    std::optional<Done> look(std::uint32_t lane)
    {
        Lane& l = lanes_[lane];
        if (!l.busy) // each lane is in one read at most, and reported once
            throw std::logic_error("kv::Client: a read's completion for lane " + std::to_string(lane) +
                                   ", which has nothing in flight");
        if (l.guessed)
            return look_guessed(lane);
        for (std::uint32_t i = 0, n = reach(l); i < n; ++i) {
            const Slot s{copy(lane, i), h_.g};
            if (!s.whole()) {
                ++torn_;
                if (++l.tries > 100000)
                    throw std::runtime_error("slot of key " + l.key + " torn 100000 times in a row");
                read_slot(lane); // l.probe is this slot's
                return std::nullopt;
            }
            l.tries = 0;
            if (holds_key(s, l))
                return found(lane, s);
            if (s.state() == State::unused || ++l.probe == probe_max) {
                places_.keep(l.hash, 0); // no guess for it any more
                return finish(lane, Status::not_found);
            }
        }
        read_slot(lane);
        return std::nullopt;
    }

    /// The copies read where the key was last found: done if one of them is whole and
    /// holds it; else (the key deleted, moved or crowded out since, or a copy torn by a
    /// rewrite, perhaps another key's) from the key's home, as a GET without a guess.
    std::optional<Done> look_guessed(std::uint32_t lane)
    {
        Lane& l = lanes_[lane];
        for (std::uint32_t i = 0, n = reach(l); i < n && l.probe + i < probe_max; ++i) {
            const Slot s{copy(lane, i), h_.g};
            if (!s.whole()) {
                ++torn_;
                break;
            }
            if (holds_key(s, l)) {
                l.probe += i;
                return found(lane, s);
            }
        }
        l.guessed = false;
        l.probe = 0;
        read_slot(lane);
        return std::nullopt;
    }

    static bool holds_key(const Slot& s, const Lane& l) { return s.state() == State::full && s.key() == l.key; }
    /// The GET done: `s`, l.probe slots past the key's home, holds its value.
    Done found(std::uint32_t lane, const Slot& s)
    {
        places_.keep(lanes_[lane].hash, lanes_[lane].probe);
        Done d = finish(lane, Status::ok);
        d.value = s.value();
        return d;
    }

    void request(Lane& l, std::uint32_t lane, Op op, std::span<const std::byte> value)
    {
        std::byte* r = requests_->data() + lane * h_.g.request_size();
        const auto klen = static_cast<std::uint16_t>(l.key.size());
        const auto vlen = static_cast<std::uint32_t>(value.size());
        r[0] = static_cast<std::byte>(op);
        std::memcpy(r + 2, &klen, 2);
        std::memcpy(r + 4, &vlen, 4);
        std::memcpy(r + 8, l.key.data(), klen);
        if (!value.empty())
            std::memcpy(r + 8 + klen, value.data(), vlen);
        c_.node().write_notify(c_.peer_id(),
                               requests_->slice(lane * h_.g.request_size(), 8 + klen + vlen),
                               h_.requests, lane * h_.g.request_size(), lane, &sent_);
    }

    Done finish(std::uint32_t lane, Status s)
    {
        lanes_[lane].busy = false;
        return Done{lane, lanes_[lane].kind, s, {}};
    }

    Done wait(weft::Deadline deadline)
    {
        Done d;
        while (poll(std::span(&d, 1)) == 0)
            if (deadline.expired())
                throw weft::TimeoutError("kv::Client", -ETIMEDOUT, std::string(c_.selection().provider()),
                                         "the KV server did not answer before the deadline");
        return d;
    }

    static constexpr std::size_t max_batch = 16;
    struct Batch { // one read's lanes: the context of its completion
        std::array<std::uint32_t, max_batch> lanes;
        std::uint32_t n = 0;
    };

    weft::Connection c_;
    Hello h_;
    std::uint32_t span_;                           // slots a GET reads at once
    std::shared_ptr<weft::MemoryRegion> copies_;   // GETs' sinks, span_ slots per lane
    std::shared_ptr<weft::MemoryRegion> requests_; // PUTs' and DELETEs' sources, one per lane
    std::vector<Lane> lanes_;
    Places places_{h_.g.slots};
    std::vector<Batch> batches_;          // one per lane at most: a batch has a lane or more
    std::vector<Batch*> free_;            // batches no read is using
    std::size_t batch_max_;               // lanes one read takes (read_ranges_limit)
    std::vector<std::uint32_t> pending_;  // lanes whose read the next flush() posts
    std::deque<Done> ready_;              // done, not yet returned by poll()
    std::uint64_t torn_ = 0;
    std::uint64_t reads_ = 0;
    char sent_ = 0; // the context of the requests' writes (their completions mean nothing here)
};

} // namespace kv
