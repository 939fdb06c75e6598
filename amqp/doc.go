// Package amqp is SmartGo's AMQP 0-9-1 engine, in the position of package
// mqtt: it speaks the protocol RabbitMQ clients use (connections,
// channels, exchanges and bindings, queues, deliveries and acks,
// publisher confirms) and knows nothing of RocketMQ. What must outlive
// the process goes through the Backend it defines; package bridge
// implements it on the broker. Package amqp/wire holds the frame and
// method codec.
//
// # What is implemented
//
// RabbitMQ's dialect of 0-9-1: connection (PLAIN and AMQPLAIN logins,
// tune, virtual hosts, heartbeats, connection.close, update-secret),
// channel (open, close, flow), exchange (declare, delete, bind, unbind:
// exchange-to-exchange bindings), queue (declare, bind, unbind, purge,
// delete), basic (qos, consume, cancel, publish, return, deliver, get,
// ack, reject, nack, recover, recover-async), confirm.select and tx.
// connection.start announces the capabilities publisher_confirms,
// exchange_exchange_bindings, basic.nack, consumer_cancel_notify,
// authentication_failure_close, per_consumer_qos, consumer_priorities
// (basic.consume argument x-priority: a queue delivers to the highest
// priority consumer that can take a message, round robin among equals)
// and connection.blocked (sent while a Backend that is an AlarmSource
// reports a resource alarm: see AlarmSource).
//
// Exchanges: the default exchange "" and amq.direct, amq.fanout,
// amq.topic, amq.headers, amq.match exist in every virtual host; the
// types direct, fanout, topic (words split on '.', '*' one word, '#'
// zero or more) and headers (x-match all, any, all-with-x, any-with-x; a
// void argument matches presence). Exchange argument alternate-exchange
// is implemented; others are accepted and ignored.
//
// Queue arguments implemented: x-max-length, x-max-length-bytes,
// x-overflow (drop-head, reject-publish, reject-publish-dlx),
// x-message-ttl, x-expires, x-dead-letter-exchange,
// x-dead-letter-routing-key (dead-lettering on reject or nack without
// requeue, on expiry and on drop-head overflow, with the x-death header),
// x-max-priority (0 to 255; a message's priority property, capped at
// it, picks its level; higher levels are delivered first, FIFO within a
// level), x-single-active-consumer (the longest-standing consumer gets
// every message; when it goes, the next one takes over), x-queue-type
// "classic", x-queue-mode default or lazy (no difference here). Refused
// with 406 PRECONDITION_FAILED because they are not implemented:
// x-queue-type other than classic, x-max-age,
// x-stream-max-segment-size-bytes. Other arguments are accepted and
// ignored, as RabbitMQ does.
//
// # Goroutines and their owners
//
// Serve owns one goroutine per accepted connection (conn.serve, the
// connection's reader) and waits for all of them before it returns. Each
// reader owns the connection's writer goroutine (writeLoop) and waits for
// it before it returns. Everything a connection sends goes through its
// outbound queue, which the writer drains; nothing holds a lock across
// socket I/O. NewServer starts two goroutines that Close waits for: the
// durable worker (calls QueueLog.Append in enqueue order, commits
// acknowledged offsets every 200 ms, closes and deletes the logs of
// deleted queues) and the janitor (message TTLs and x-expires, every 25
// ms while some queue has one; asleep otherwise).
//
// # Durability
//
// With a Backend, durable exchanges, queues and bindings are saved with
// SaveDefinitions before the client's declare, bind or delete is
// answered, and loaded by NewServer. A durable queue appends every
// message it takes to its QueueLog (persistent or not); the message is
// deliverable at once, as in RabbitMQ, while its publisher's confirm (and
// a tx.commit-ok) waits until the log reports it stored. A failed store
// is basic.nack under confirms, 541 INTERNAL_ERROR on the channel
// otherwise. Acks advance each queue's low-water mark (the first offset
// still ready, unacked or being stored), committed every 200 ms and at
// Close; at start the messages from the committed offset on are ready
// again, redelivered. When an append is stored past the last offset the
// queue knows (messages it could not read when it loaded, such as a
// broker's records not indexed yet after a restart on a full disk), the
// queue holds the offsets in between, reads them from its log and makes
// them ready: no commit passes a message the queue never held.
//
// # Flow control and timeouts
//
// Deliveries are bounded by prefetch (basic.qos) and, for every consumer,
// by its connection's outbound queue: while more than 1 MiB waits there,
// queues skip the connection's consumers and deliver to others; they come
// back when the writer has drained half of it. A connection whose
// outbound queue exceeds 8 MiB (a peer that publishes but does not read)
// is not read from until it drains. The handshake must finish within 10
// s; a peer silent for two heartbeat intervals is dropped, and so is one
// that takes more than 60 s (or two heartbeat intervals) to take one
// write. A body over MaxMessageSize closes the channel with 406
// PRECONDITION_FAILED; a publish that would take a queue's ready bytes
// over MaxQueueBytes is dropped (basic.nack under confirms).
//
// # Known limits
//
// All messages are held in memory (a durable queue's too, besides its
// log). Message TTLs count from when the message entered the queue, and
// after a restart from the restart. basic.recover and recover-async with
// requeue false are 540 NOT_IMPLEMENTED, as in RabbitMQ. basic.qos
// prefetch-size is ignored. Dead-letter cycles are broken as in RabbitMQ
// only roughly: a message that already died in a queue is not
// dead-lettered into it again unless it was rejected. A TTL of 0 delivers
// the message if a consumer can take it at once; otherwise it expires
// within the janitor's 25 ms. A content header frame never exceeds the
// receiving connection's frame_max: a consumer that cannot take a
// message's header has its channel closed with 406 (the message stays),
// basic.get likewise, and a dead-lettering whose x-death would take the
// header past Options.FrameMax drops the message. There is no memory alarm: connection.blocked
// is sent only for the Backend's resource alarm (AlarmSource).
package amqp
