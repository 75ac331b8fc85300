// SPDX-License-Identifier: MIT
/// @brief Awaited work with weft: coroutines over a Node, Transfers, Task.
///
///     weft::Task<> prefill(std::shared_ptr<weft::Node> node, ...) {
///         auto t = weft::Transfer::prepare(node, weft::Direction::write, entries,
///                                          weft::Notify{.enabled = true});
///         t.post();
///         co_await t.done(weft::Deadline::after(2s));
///         weft::Completion c = co_await node->notification(peer, weft::Deadline::after(2s));
///     }
///     node->run(prefill(node, ...), weft::Deadline::after(10s));
///
/// Which thread runs what: every awaited call posts on the calling thread (the
/// Node's, one at a time), and a coroutine resumes only inside
/// Node::dispatch(), on the thread calling it, after the batch of completions
/// it read; an operation weft finds complete at once (an inject's) does not
/// suspend. weft starts no thread for it. What libfabric holds as an
/// operation's context is a slot of the Node's arena, never a coroutine frame:
/// a wait that timed out, was cancelled (std::stop_token) or whose frame was
/// destroyed leaves its operation flying, and its late completion is reaped
/// (delivered to nobody); Node::drained(peer) says when the buffers are the
/// caller's again. A lost peer resumes every waiter of it at once, with
/// Error::peer_lost(). Nothing is allocated per operation once the arena has
/// grown to the most operations in flight. Who drives dispatch(): node.run(task,
/// deadline), Transfer::wait, an application's epoll loop (docs/async.md), or
/// the Asio adapter (weft/asio.hpp).
#pragma once

#include "weft/async/task.hpp"
#include "weft/async/transfer.hpp"
#include "weft/peers/node.hpp"
