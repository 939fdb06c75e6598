package bridge

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Sentinel errors of the bridge package. Callers test with errors.Is.
var (
	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("bridge: invalid options")

	// ErrClosed is returned by a backend or bridge after Close.
	ErrClosed = errors.New("bridge: closed")

	// ErrUnencodable means an MQTT message cannot travel as a broker
	// message: a topic, response topic, content type, client id or user
	// name holds the bytes 0x01 or 0x02 (the broker's property
	// separators). The publisher gets 0x80 (v5) or is disconnected (3.1.1).
	// It wraps mqtt.ErrUnstorable: a will refused so is not tried again.
	ErrUnencodable = fmt.Errorf("bridge: message not encodable as broker properties (%w)", mqtt.ErrUnstorable)

	// ErrBadRecord means a session or retained record read from a system
	// topic could not be decoded; it is skipped with a log line.
	ErrBadRecord = errors.New("bridge: bad system record")
)

// whatMax bounds what a storeFailed error quotes (see there).
const whatMax = 64

// storeFailed is the error of a failed store of what in the broker. A
// broker whose disk is full refuses with client.ErrDiskFull: the error
// then wraps mqtt.ErrQuotaExceeded too, and an MQTT 5 publisher gets
// PUBACK/PUBREC 0x97 quota exceeded instead of 0x80. A message the
// producer's checks or the broker (MESSAGE_ILLEGAL) refuse itself,
// client.ErrBadMessage (a topic and properties over a record's 32,767
// bytes of properties: a topic of 32 KiB or more, or big user
// properties), wraps mqtt.ErrUnstorable too: no try can store it, so a
// will refused so is dropped rather than kept and tried again for as
// long as the server runs (one per connection that ended, memory a
// client could grow), as ErrUnencodable's are. The error is also
// the reason string the publisher gets (at most 200 bytes), so what (a
// topic, up to 65,535 bytes) is cut to whatMax bytes to leave room for
// the cause.
func storeFailed(what string, err error) error {
	if len(what) > whatMax {
		cut := whatMax
		for cut > 0 && !utf8.RuneStart(what[cut]) {
			cut--
		}
		what = what[:cut] + "..."
	}
	switch {
	case errors.Is(err, client.ErrDiskFull):
		return fmt.Errorf("bridge: store %s: %w: %w", what, mqtt.ErrQuotaExceeded, err)
	case errors.Is(err, client.ErrBadMessage):
		return fmt.Errorf("bridge: store %s: %w: %w", what, mqtt.ErrUnstorable, err)
	}
	return fmt.Errorf("bridge: store %s: %w", what, err)
}
