// Package remoting is SmartGo's framed RPC over TCP, speaking RocketMQ's
// remoting protocol (see package protocol for the bytes): a Server with
// processors registered per request code on bounded worker pools, a Client
// with one connection per address, and the Conn both are built on.
//
// # Connections
//
// A Conn is symmetric. Its reader reads frames (the length word is checked
// against MaxFrameSize before anything is allocated; a connection on which
// no frame completes for IdleTimeout is closed, so the whole frame must
// arrive within it), routes responses to the requests waiting for them by
// opaque, and hands requests to the dispatcher. Any side may send requests
// (Invoke, InvokeAsync, Oneway) and responses (WriteResponse), so a broker
// can call the consumers connected to it on their own connections.
//
// Frames are read with large reads straight into 64 KiB chunks (bigger for
// bigger frames) and decoded in place: a received Body aliases its chunk;
// Remark and ExtFields are copied out of the header.
//
// # Receive buffer reuse
//
// Chunks are reference counted: the reader holds one while it reads into
// a chunk and every command decoded from it holds one until
// protocol.Command.Recycle drops it. A chunk whose references are all
// dropped is reused (in place by its reader, or through a pool); a command
// that is never recycled keeps its chunk from being reused, which is
// always safe. Who recycles:
//
//   - Requests to processors registered with RegisterOptions.NoRetain: the
//     connection, once the processor returned and its response no longer
//     needs the body (queued with the body copied, or written or dropped
//     when it is sent without a copy: bodies above 16 KiB, BodyBuffers).
//   - Requests answered REQUEST_CODE_NOT_SUPPORTED or SYSTEM_BUSY, and
//     responses nobody waits for: the connection.
//   - Responses returned by Invoke or passed to an InvokeAsync callback:
//     the caller, optionally, when done with Body.
//   - Requests to other processors: nobody (their chunks are never reused).
//
// On a server connection one goroutine reads. On a client connection
// reading is a token: a caller of Invoke that finds nobody reading reads
// itself until its own response is there, serving whatever else arrives,
// and then passes the token to the longest-waiting caller; a background
// goroutine reads when no caller does (at once for async calls, else after
// 500 µs without a reading caller, so that a caller calling again soon
// finds the token free). A lone caller is thus woken by its own response
// instead of by a reader goroutine. A reading caller's deadline is the read
// deadline; cancellation interrupts the read.
//
// Socket deadlines (IdleTimeout, WriteTimeout) move lazily: set to the
// timeout plus a slack of 1/16 of it (at most 100 ms) and left alone while
// more than the timeout remains, so they fire between the timeout and the
// timeout plus slack after the last activity.
//
// Writes are combined ("flush on drain"): a sender encodes its frame into
// the connection's write buffer under a mutex; if no write is in progress
// it becomes the writer and writes everything queued, swapping buffers so
// that others keep appending meanwhile. Many small frames thus share one
// writev. Bodies above 16 KiB and BodyBuffers parts are not copied: they
// are written as their own net.Buffers parts and Release runs after the
// write. While MaxWriteQueue bytes wait, senders block; the read loop's own
// answers (SYSTEM_BUSY, not supported) never block.
//
// # Dispatch
//
// Unknown codes are answered REQUEST_CODE_NOT_SUPPORTED (3) with remark
// " request type <code> not supported". A request whose pool queue is full
// is answered SYSTEM_BUSY (2) with "[REJECTREQUEST]system busy, start flow
// control for a while". Requests with the oneway bit are never answered.
// A processor may return nil and answer later with Conn.WriteResponse.
//
// A pool runs at most Workers of its requests at once (each holds one of
// its slots) and accepts at most QueueSize more, which wait in its queue
// (or in a worker waiting for a slot); a request arriving beyond that is
// answered SYSTEM_BUSY. A request skips the queue only while nothing of its
// pool is pending, so it never overtakes a request queued before it (with
// one worker, a pool runs one connection's requests in arrival order).
//
// Processors registered with Register lead on server connections: while
// their pool has a free slot and nothing pending, the reader runs the
// processor itself instead of waking a worker (the wake-up of an idle
// thread per request was most of the cost of the hand-off), and queues
// the response like an inline one. Nobody reads the connection meanwhile;
// a watchdog goroutine, ticking every millisecond while leads run (asleep
// after 100 ms without one), gives the reading to a new goroutine when a
// lead runs for more than one to two ticks, so that a processor that
// blocks (a sync flush, a call to the peer on the same connection) delays
// the connection's other requests by one to two milliseconds; the old
// reader stops once its processor returned. The next 10000 leads of a route
// whose lead was taken over hand the reading off before the processor
// runs. Client connections never lead: their requests go to the pool.
//
// Processors registered with RegisterInline skip the worker hand-off:
// while their pool has nothing pending and fewer than Workers of its
// requests run, the reader runs the processor itself, takes no slot and is
// never taken over; the reader writes the queued responses in one write
// before it may block reading again (no whole frame left in its buffer) or
// once MaxWriteQueue bytes wait.
//
// # Goroutines and locks
//
// Server: one accept loop, one reader per connection (a new goroutine
// each time the reading is handed off; the old one ends with its
// processor), the pool workers and the watchdog; Close stops accepting,
// closes connections, drains the queued requests and waits for all of
// them. Client: one background reader per connection
// (reading only while no caller holds the read token) and its handler
// pool workers. Async callbacks run on their own goroutines, counted per
// connection and waited for by Close.
//
// Lock order: Server.mu and Client.mu are never held while a Conn lock is
// taken. Conn.mu (pending calls, close state) and Conn.wmu (write buffer)
// are never held together. Close hooks run with no lock held.
package remoting
