// SPDX-License-Identifier: MIT
/// @brief A growable FIFO ring for completions held back while waiting for
/// another one. Allocation-free once it has reached its working size.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace weft::detail {

template <class T>
class Ring {
public:
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }

    void push_back(const T& v)
    {
        if (size_ == buf_.size())
            grow();
        buf_[(head_ + size_) & (buf_.size() - 1)] = v;
        ++size_;
    }
    /// The slot push_back would fill, counted in: the caller fills it in place.
    T& push_slot()
    {
        if (size_ == buf_.size())
            grow();
        return buf_[(head_ + size_++) & (buf_.size() - 1)];
    }
    T pop_front() noexcept
    {
        T v = buf_[head_];
        head_ = (head_ + 1) & (buf_.size() - 1);
        --size_;
        return v;
    }
    T& operator[](std::size_t i) noexcept { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    /// Removes element i, keeping the order of the others.
    void erase(std::size_t i) noexcept
    {
        for (; i + 1 < size_; ++i)
            (*this)[i] = (*this)[i + 1];
        --size_;
    }

private:
    void grow()
    {
        std::vector<T> bigger(buf_.empty() ? 16 : buf_.size() * 2);
        for (std::size_t i = 0; i < size_; ++i)
            bigger[i] = (*this)[i];
        buf_ = std::move(bigger);
        head_ = 0;
    }

    std::vector<T> buf_; // size is 0 or a power of two
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

} // namespace weft::detail
