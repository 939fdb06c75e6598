package amqp

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Sentinel errors of the amqp package. Callers test with errors.Is.
var (
	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("amqp: invalid options")
	// ErrClosed is returned by Serve after Close.
	ErrClosed = errors.New("amqp: server closed")
)

// Options configure a Server. A zero field takes its value from
// DefaultOptions.
type Options struct {
	// Backend stores durable definitions and durable queues' messages;
	// nil keeps everything in memory.
	Backend Backend
	// Authenticate checks a login; nil lets anyone log in.
	Authenticate func(user, password string) (bool, error)
	// VirtualHosts are the virtual hosts a client may open; default "/".
	VirtualHosts []string
	// ChannelMax is the highest channel number offered in connection.tune.
	ChannelMax uint16
	// FrameMax is the largest frame offered in connection.tune.
	FrameMax uint32
	// Heartbeat is the interval proposed in connection.tune; negative
	// proposes none.
	Heartbeat time.Duration
	// MaxMessageSize is the largest body a publisher may send; a larger
	// one closes its channel with 406 PRECONDITION_FAILED, as RabbitMQ
	// does.
	MaxMessageSize int
	// MaxQueueBytes bounds the bytes of ready messages one queue keeps;
	// beyond it publishes to the queue are refused (nacked under
	// confirms, dropped otherwise), like x-overflow reject-publish.
	MaxQueueBytes int64
	// Logger receives the server's logs; nil uses slog.Default().
	Logger *slog.Logger
}

// Defaults of Options: DefaultOptions is their one source of truth.
const (
	defaultChannelMax     = 2047
	defaultFrameMax       = 131072
	defaultHeartbeat      = 60 * time.Second
	defaultMaxMessageSize = 16 << 20
	defaultMaxQueueBytes  = 256 << 20
	// maxMaxMessageSize is RabbitMQ's ceiling for max_message_size.
	maxMaxMessageSize = 512 << 20
)

// DefaultOptions returns the defaults every zero field of Options takes.
func DefaultOptions() Options {
	return Options{
		VirtualHosts:   []string{"/"},
		ChannelMax:     defaultChannelMax,
		FrameMax:       defaultFrameMax,
		Heartbeat:      defaultHeartbeat,
		MaxMessageSize: defaultMaxMessageSize,
		MaxQueueBytes:  defaultMaxQueueBytes,
	}
}

// frameMinSize is AMQP 0-9-1's frame-min-size: no peer may lower frame-max
// below it.
const frameMinSize = 4096

// Validate reports the first bad value, wrapped in ErrInvalidOptions.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	for _, v := range o.VirtualHosts {
		if v == "" || len(v) > 255 {
			return bad("virtual host name %q must be 1 to 255 bytes", v)
		}
	}
	if o.FrameMax != 0 && o.FrameMax < frameMinSize {
		return bad("FrameMax %d below the protocol's minimum %d", o.FrameMax, frameMinSize)
	}
	if o.Heartbeat > 65535*time.Second {
		return bad("Heartbeat %v over 65535s", o.Heartbeat)
	}
	if o.Heartbeat > 0 && o.Heartbeat < time.Second {
		return bad("Heartbeat %v under one second (the protocol counts whole seconds)", o.Heartbeat)
	}
	if o.MaxMessageSize < 0 || o.MaxMessageSize > maxMaxMessageSize {
		return bad("MaxMessageSize %d outside [0, %d]", o.MaxMessageSize, maxMaxMessageSize)
	}
	if o.MaxQueueBytes < 0 {
		return bad("negative MaxQueueBytes %d", o.MaxQueueBytes)
	}
	return nil
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if len(o.VirtualHosts) == 0 {
		o.VirtualHosts = d.VirtualHosts
	}
	if o.ChannelMax == 0 {
		o.ChannelMax = d.ChannelMax
	}
	if o.FrameMax == 0 {
		o.FrameMax = d.FrameMax
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = d.Heartbeat
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = d.MaxMessageSize
	}
	if o.MaxQueueBytes == 0 {
		o.MaxQueueBytes = d.MaxQueueBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
