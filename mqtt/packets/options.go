package packets

import "fmt"

// DefaultMaxPacketSize is the largest packet a Decoder accepts unless told
// otherwise: 1 MiB, header included (the size EMQX also defaults to).
const DefaultMaxPacketSize = 1 << 20

// Options configures a Decoder. The zero value is valid and equals
// DefaultOptions().
type Options struct {
	// MaxPacketSize is the largest whole packet (fixed header included),
	// in bytes, the decoder accepts; a larger one fails with
	// ErrPacketTooLarge as soon as its fixed header is read, before
	// anything is allocated. 0 means DefaultMaxPacketSize. A server
	// advertises the same value as Maximum Packet Size in CONNACK.
	MaxPacketSize int

	// Alias makes decoded packets share memory with the input: every
	// string and byte slice (topic, payload, properties, client id) points
	// into the buffer passed to Decode, and nothing is copied. Such a
	// packet is valid only until that buffer is modified or reused; call
	// Detach before keeping it longer, and never keep one of its strings
	// (a map key, a topic alias table) without copying it. When false
	// (the default) Decode copies into at most two allocations per packet.
	Alias bool
}

// DefaultOptions returns the default decoder options.
func DefaultOptions() Options {
	return Options{MaxPacketSize: DefaultMaxPacketSize}
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.MaxPacketSize != 0 && (o.MaxPacketSize < 2 || o.MaxPacketSize > MaxPacketSizeLimit) {
		return fmt.Errorf("packets: MaxPacketSize %d outside [2, %d]", o.MaxPacketSize, MaxPacketSizeLimit)
	}
	return nil
}

// Decoder decodes packets from byte buffers. It holds no state besides its
// options, so one Decoder may serve every connection concurrently. The zero
// Decoder uses DefaultOptions.
type Decoder struct {
	maxPacketSize int
	alias         bool
}

// NewDecoder returns a decoder with the given options.
func NewDecoder(o Options) (*Decoder, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Decoder{maxPacketSize: o.MaxPacketSize, alias: o.Alias}, nil
}

func (d *Decoder) max() int {
	if d.maxPacketSize == 0 {
		return DefaultMaxPacketSize
	}
	return d.maxPacketSize
}

var defaultDecoder Decoder

// DecodeFixedHeader is DecodeFixedHeader of a Decoder with DefaultOptions.
func DecodeFixedHeader(b []byte) (typ, flags, remainingLength, headerLen int, err error) {
	return defaultDecoder.DecodeFixedHeader(b)
}

// Decode is Decode of a Decoder with DefaultOptions (copying, 1 MiB limit).
func Decode(v Version, b []byte) (Packet, error) {
	return defaultDecoder.Decode(v, b)
}
