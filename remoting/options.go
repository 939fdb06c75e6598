package remoting

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Pool names a worker pool of a server. Each request code is served by the
// pool it was registered with.
type Pool uint8

// Worker pools.
const (
	PoolDefault Pool = iota
	PoolSend
	PoolPull
	PoolAdmin
	PoolHeartbeat
	numPools
)

var poolNames = [numPools]string{"default", "send", "pull", "admin", "heartbeat"}

// String returns the pool's name.
func (p Pool) String() string {
	if p < numPools {
		return poolNames[p]
	}
	return fmt.Sprintf("Pool(%d)", p)
}

// PoolOptions sizes a worker pool: its Workers goroutines run its
// requests, and at most QueueSize more wait; a request beyond that is
// answered SYSTEM_BUSY at once. Inline processors take no worker.
type PoolOptions struct {
	Workers   int
	QueueSize int
}

// RegisterOptions qualify a processor registered with
// Server.RegisterWith. The zero value is Register's behaviour.
type RegisterOptions struct {
	// Inline runs the processor on the connection's reader, always (see
	// Server.RegisterInline).
	Inline bool
	// NoRetain declares that the processor keeps no reference to the
	// request's Body, nor to any slice of it, once it returned: not in
	// state it stores, not in goroutines it starts, not in a response it
	// writes later with Conn.WriteResponse (a long-polling processor may
	// keep req itself: Remark, ExtFields, Code, Opaque and the other
	// fields stay valid). The response it returns may alias the body (an
	// echo). The connection then reuses the request's receive buffer once
	// the response was written (or dropped) and recycles req
	// (protocol.Command.Recycle sets req.Body to nil). Remark and
	// ExtFields values are copies and are never affected; with
	// TypedHeader, the strings of typed headers decoded from the field
	// list are not (see TypedHeader). A processor that breaks the promise
	// may see another request's bytes in what it kept.
	NoRetain bool
	// NoKeep declares, on top of NoRetain, that the processor keeps no
	// reference to req itself once it returned: an answer it writes
	// later goes with a request of its own holding the opaque, flag and
	// serialize type it copied (Conn.WriteResponse reads nothing else).
	// The connection then hands the request's Command to the decoding of
	// a later frame (protocol.Command.Done) instead of allocating one per
	// request. A processor that breaks the promise may answer or read
	// another request.
	NoKeep bool
	// TypedHeader declares that the processor reads the request's
	// extFields only through Command.DecodeHeader or Command.Fields,
	// never through the ExtFields map directly: a JSON header's extFields
	// are then kept as a field list when the frame is decoded, and
	// DecodeHeader reads them straight into typed headers that have a
	// generated decoder (the send and pull headers), so no map is built
	// for the request (see protocol.DecodeFrameWith). ExtFields is nil until
	// Fields is called. The list lives in the request's receive buffer:
	// the strings DecodeHeader puts into those typed headers are valid
	// until the request is recycled (with NoRetain, once the processor
	// returned), and a processor keeps a copy of whatever it keeps beyond
	// (strings.Clone; Command.OwnFields for a request kept to be decoded
	// again, such as a held pull).
	TypedHeader bool
	// BatchEnd runs on the connection's reader once it has served every
	// whole frame of a read, when it ran this processor on one of them
	// (an Inline processor; after each request on a worker otherwise),
	// before the answers queued for the batch are written. Responses
	// the connection's own batch gets meanwhile, from any goroutine
	// (Conn.WriteResponse), leave in that same write without waking the
	// writer goroutine. A processor that defers work to the end of a
	// batch uses it: the broker's sends write out and answer the batch's
	// puts there (store.Store.Drain). It must not block.
	BatchEnd func(c *Conn)
}

// Defaults shared by servers and clients.
const (
	DefaultIdleTimeout    = 120 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultRequestTimeout = 3 * time.Second
	DefaultDialTimeout    = 3 * time.Second
	DefaultMaxWriteQueue  = 4 << 20
	// DefaultReadCoalesce is a server connection's ReadCoalesce.
	DefaultReadCoalesce = time.Millisecond
	// DefaultReadBuffer is a server connection's ReadBuffer.
	DefaultReadBuffer = 1 << 20
)

// ConnOptions are the per-connection settings shared by Options and
// ClientOptions. Zero values take the documented defaults.
type ConnOptions struct {
	// IdleTimeout closes a connection on which no complete frame arrived
	// for this long (plus up to 1/16 of it, at most 100 ms: deadlines move
	// lazily); it also bounds the time to receive one frame, so a peer
	// trickling bytes is cut off. Default 120 s for servers, off for
	// clients; negative disables.
	IdleTimeout time.Duration
	// MaxFrameSize is the largest frame accepted, length word included,
	// checked before allocating. Default 16 MiB.
	MaxFrameSize int64
	// WriteTimeout bounds one socket write (to within 1/16 of it, at most
	// 100 ms, more). Default 30 s.
	WriteTimeout time.Duration
	// MaxWriteQueue is how many bytes may wait for the socket before
	// senders block until they are written (backpressure). Default 4 MiB.
	MaxWriteQueue int64
	// RequestTimeout is the timeout of requests sent on the connection
	// when the context has no deadline. Default 3 s.
	RequestTimeout time.Duration
	// ReadCoalesce is how long a server connection's reader waits before
	// reading again while its peer pipelines requests faster than four
	// per ReadCoalesce but slower than the reader serves them, so that
	// one read and one write serve several (see coalesce.go). It adds at
	// most this much to such a request's latency, and nothing to a peer
	// that waits for each answer. Default 1 ms (Linux only; client
	// connections never wait); negative disables.
	ReadCoalesce time.Duration
}

func (o *ConnOptions) fill(idle time.Duration) {
	if o.IdleTimeout == 0 {
		o.IdleTimeout = idle
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = protocol.DefaultMaxFrameSize
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxWriteQueue == 0 {
		o.MaxWriteQueue = DefaultMaxWriteQueue
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.ReadCoalesce == 0 {
		o.ReadCoalesce = DefaultReadCoalesce
	}
}

func (o *ConnOptions) validate() error {
	switch {
	case o.MaxFrameSize < 0 || (o.MaxFrameSize > 0 && o.MaxFrameSize < 64) || o.MaxFrameSize > 1<<31:
		return fmt.Errorf("%w: MaxFrameSize %d outside [64, 2 GiB]", ErrBadOptions, o.MaxFrameSize)
	case o.WriteTimeout < 0:
		return fmt.Errorf("%w: negative WriteTimeout", ErrBadOptions)
	case o.MaxWriteQueue < 0:
		return fmt.Errorf("%w: negative MaxWriteQueue", ErrBadOptions)
	case o.RequestTimeout < 0:
		return fmt.Errorf("%w: negative RequestTimeout", ErrBadOptions)
	}
	return nil
}

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Addr is the listen address. Default ":0".
	Addr string
	ConnOptions
	// ReadBuffer is the receive buffer (SO_RCVBUF) every accepted
	// connection's socket has, in bytes, set on the listener: the kernel
	// doubles it for its bookkeeping and no longer grows it by itself. A
	// client that pipelines many requests then has at most about this
	// many bytes on their way, where the kernel's own tuning lets the
	// buffer grow to several MiB and costs the server more CPU per
	// request (see docs/performance-broker.md, "Thirty-second session").
	// It bounds one connection's throughput to about ReadBuffer per round
	// trip: 1 MiB is 100 MB/s at 10 ms. Default 1 MiB (Linux only);
	// negative leaves the buffer to the kernel.
	ReadBuffer int
	// Worker pools per request-code group. Defaults: send 16/10000,
	// pull 8/100000, admin 2/1000, heartbeat 2/50000, default 4/10000
	// (workers/queue).
	SendPool, PullPool, AdminPool, HeartbeatPool, DefaultPool PoolOptions
	// Logger receives connection events; nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	var o Options
	o.fill()
	return o
}

func (o *Options) fill() {
	if o.Addr == "" {
		o.Addr = ":0"
	}
	o.ConnOptions.fill(DefaultIdleTimeout)
	if o.ReadBuffer == 0 {
		o.ReadBuffer = DefaultReadBuffer
	}
	fillPool(&o.SendPool, 16, 10000)
	fillPool(&o.PullPool, 8, 100000)
	fillPool(&o.AdminPool, 2, 1000)
	fillPool(&o.HeartbeatPool, 2, 50000)
	fillPool(&o.DefaultPool, 4, 10000)
}

func fillPool(p *PoolOptions, workers, queue int) {
	if p.Workers == 0 {
		p.Workers = workers
	}
	if p.QueueSize == 0 {
		p.QueueSize = queue
	}
}

func (o *Options) pool(p Pool) PoolOptions {
	switch p {
	case PoolSend:
		return o.SendPool
	case PoolPull:
		return o.PullPool
	case PoolAdmin:
		return o.AdminPool
	case PoolHeartbeat:
		return o.HeartbeatPool
	}
	return o.DefaultPool
}

// Validate reports the first invalid setting. Zero values are valid (they
// mean "default").
func (o *Options) Validate() error {
	if err := o.ConnOptions.validate(); err != nil {
		return err
	}
	if o.ReadBuffer > 1<<30 {
		return fmt.Errorf("%w: ReadBuffer %d above 1 GiB", ErrBadOptions, o.ReadBuffer)
	}
	for p := Pool(0); p < numPools; p++ {
		if po := o.pool(p); po.Workers < 0 || po.QueueSize < 0 {
			return fmt.Errorf("%w: negative size of pool %s", ErrBadOptions, p)
		}
	}
	return nil
}

// ClientOptions configure a Client. Zero values take the documented
// defaults.
type ClientOptions struct {
	ConnOptions
	// DialTimeout bounds connecting when the context has no deadline.
	// Default 3 s.
	DialTimeout time.Duration
	// SerializeType is the header encoding of requests. Default JSON.
	SerializeType protocol.SerializeType
	// HandlerPool serves requests servers send to the client. Default
	// 4 workers, queue 1000.
	HandlerPool PoolOptions
	// Logger receives connection events; nil discards.
	Logger *slog.Logger
}

// DefaultClientOptions returns ClientOptions with every default filled in.
func DefaultClientOptions() ClientOptions {
	var o ClientOptions
	o.fill()
	return o
}

func (o *ClientOptions) fill() {
	o.ConnOptions.fill(-1)
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	fillPool(&o.HandlerPool, 4, 1000)
}

// Validate reports the first invalid setting.
func (o *ClientOptions) Validate() error {
	if err := o.ConnOptions.validate(); err != nil {
		return err
	}
	if o.DialTimeout < 0 {
		return fmt.Errorf("%w: negative DialTimeout", ErrBadOptions)
	}
	if o.SerializeType > protocol.SerializeRocketMQ {
		return fmt.Errorf("%w: unknown serialize type %d", ErrBadOptions, o.SerializeType)
	}
	if o.HandlerPool.Workers < 0 || o.HandlerPool.QueueSize < 0 {
		return fmt.Errorf("%w: negative handler pool size", ErrBadOptions)
	}
	return nil
}

// peerLogger is the logger of a server or client: every line its
// connections write is driven by a peer, so each reason is written at most
// once per ratelog.DefaultInterval, with the count of lines suppressed. A
// nil logger discards.
func peerLogger(l *slog.Logger) *slog.Logger {
	return ratelog.Wrap(l, 0)
}
