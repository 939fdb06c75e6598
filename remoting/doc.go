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
// (Invoke, InvokeAsync, InvokeNoWait, Oneway) and responses
// (WriteResponse), so a broker can call the consumers connected to it on
// their own connections.
//
// Frames are read with large reads straight into 64 KiB chunks (bigger for
// bigger frames) and decoded in place: a received Body aliases its chunk;
// Remark and ExtFields are copied out of the header. Requests to a
// processor registered with RegisterOptions.TypedHeader keep their JSON
// extFields as a field list (read in the same pass as the rest of the
// header and written over the header's own bytes in the chunk) instead of
// a map: the processor decodes them with DecodeHeader, straight into the
// typed header for the send and pull headers (see package protocol). The
// typed header's strings are then slices of the chunk, valid until the
// request is recycled, like Body: a processor keeps copies of what
// outlives that (protocol.Command.Recycle, Command.OwnFields).
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
// # Reading and writing
//
// Every connection, on either side, has two goroutines: a reader and a
// writer (nats-server's readLoop and writeLoop). The reader reads frames,
// hands responses to their callers and requests to the dispatcher, which
// runs inline processors on the reader itself and queues the others for
// their pool. A caller of Invoke is woken by the reader when its response
// arrives.
//
// On Linux a TCP connection's read(2) and writev(2) are raw system calls
// on its non-blocking socket, made inside syscall.RawConn's Read and
// Write, which wait in Go's network poller (deadlines and Close included)
// when the socket is not ready: the calls never block, and the runtime
// never hands the caller's P to another thread during one, nor keeps its
// monitor polling every 20 µs because of them (sock_linux.go).
//
// Socket deadlines (IdleTimeout, WriteTimeout) move lazily: set to the
// timeout plus a slack of 1/16 of it (at most 100 ms) and left alone while
// more than the timeout remains, so they fire between the timeout and the
// timeout plus slack after the last activity.
//
// Writes are combined: a sender appends its frame to the connection's
// write buffer under a mutex; whoever owns the write side writes
// everything queued in one writev, swapping buffers so that others keep
// appending meanwhile. Who writes depends on the sender:
//
//   - Send (requests, and Invoke): the sender writes itself when no write
//     is under way; while MaxWriteQueue bytes wait it blocks
//     (backpressure; a peer that stops reading is cut off after
//     WriteTimeout).
//   - WriteResponse (answers given later: a pool worker's, a group commit
//     completing sends, a held pull woken by a message), OnewayNoWait
//     (notices to many peers) and InvokeNoWait (calls to a peer that may
//     have stopped reading: a broker's calls to a client for an admin
//     command): never block; the writer goroutine is woken when no write
//     is under way. InvokeNoWait is refused (ErrNotReading) while
//     MaxWriteQueue bytes wait, queued or not yet written by the write
//     under way (Conn.NotReading), and its timeout says whether the
//     request was still waiting for the socket.
//   - The reader's own answers (inline processors, SYSTEM_BUSY, not
//     supported) are queued and written by the reader once it has served
//     every whole frame it read, before it may block reading again: one
//     write per batch of requests. On a server connection the reader then
//     waits while MaxWriteQueue bytes are still queued, so a peer that
//     sends requests without reading their answers is not read either;
//     client readers never wait for writes, so two peers cannot block
//     each other's readers.
//   - Work a processor defers to the end of the batch
//     (RegisterOptions.BatchEnd: the broker's sends write their records
//     out and answer there) runs before that write; answers to the
//     connection given meanwhile, from any goroutine, are queued for it
//     without waking the writer goroutine.
//
// A server connection whose peer pipelines requests one per write faster
// than four per ConnOptions.ReadCoalesce (1 ms by default), but slower
// than the reader serves them, is read every ReadCoalesce instead of at
// every request: its reader waits that long before reading again, with
// the socket's receive low-water mark raised so that the kernel does not
// wake the poller at each segment meanwhile, and one read and one write
// then serve all that came (coalesce.go). A peer that waits for each
// answer, or a wait that finds fewer than two requests, turns it off
// again (tried again after a doubling number of batches), and the reader
// never blocks with the mark raised.
//
// Bodies above 16 KiB and BodyBuffers parts are not copied: they are
// written as their own net.Buffers parts and Release runs after the
// write.
//
// # Dispatch
//
// Unknown codes are answered REQUEST_CODE_NOT_SUPPORTED (3) with remark
// " request type <code> not supported". A request whose pool queue is full
// is answered SYSTEM_BUSY (2) with "[REJECTREQUEST]system busy, start flow
// control for a while". Requests with the oneway bit are never answered.
// A processor may return nil and answer later with Conn.WriteResponse.
//
// A pool runs its requests on Workers goroutines and queues at most
// QueueSize more, in arrival order (with one worker, a pool runs one
// connection's requests in arrival order); a request arriving beyond that
// is answered SYSTEM_BUSY.
//
// Processors registered with Register run on their pool's workers, so
// they may block (and may call the peer on the same connection: its reader
// keeps reading). Processors registered with RegisterInline run on the
// connection's reader, in arrival order, with no hand-off; they must not
// block. A processor whose answer takes time (a send waiting for its group
// commit or a slave, a held pull) returns nil and answers later with
// Conn.WriteResponse from whatever goroutine completes it.
//
// # Goroutines and locks
//
// Server: one accept loop, a reader and a writer per connection, and the
// pool workers; Close stops accepting, closes connections, drains the
// queued requests and waits for all of them. Client: a reader and a
// writer per connection and its handler pool workers. Async callbacks run
// on their own goroutines, counted per connection and waited for by
// Close.
//
// Lock order: Server.mu and Client.mu are never held while a Conn lock is
// taken. Conn.mu (pending calls, close state) and Conn.wmu (write buffer)
// are never held together. Close hooks run with no lock held.
package remoting
