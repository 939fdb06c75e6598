package statestore

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Verb is a state store command.
type Verb uint8

// The verbs. KEYNOTIFY carries the protocol's STOP option and SmartGo's
// PREFIX and SINCE extensions (see doc.go).
const (
	VerbSet Verb = iota + 1
	VerbGet
	VerbDel
	VerbVDel
	VerbKeyNotify
)

var verbNames = [...]string{VerbSet: "SET", VerbGet: "GET", VerbDel: "DEL", VerbVDel: "VDEL", VerbKeyNotify: "KEYNOTIFY"}

// String returns the upper-case verb, or "Verb(n)".
func (v Verb) String() string {
	if int(v) < len(verbNames) && verbNames[v] != "" {
		return verbNames[v]
	}
	return "Verb(" + strconv.Itoa(int(v)) + ")"
}

// Condition is the SET condition option.
type Condition uint8

// The SET conditions.
const (
	CondNone Condition = iota // unconditional
	CondNX                    // NX: only if the key does not exist
	CondNEX                   // NEX: only if the key does not exist or already holds the value being set
)

// maxExpiryMs is the largest PX argument: its Duration must fit int64.
const maxExpiryMs = math.MaxInt64 / int64(time.Millisecond)

// Command is a parsed request payload.
type Command struct {
	Verb   Verb
	Key    []byte        // never empty after ParseCommand
	Value  []byte        // SET: the value; VDEL: the value the key must hold
	Cond   Condition     // SET only
	Expiry time.Duration // SET PX, whole milliseconds; 0 = never expires
	Stop   bool          // KEYNOTIFY ... STOP
	Prefix bool          // KEYNOTIFY ... PREFIX (extension): Key is a key prefix
	Since  HLC           // KEYNOTIFY ... SINCE <hlc> (extension); zero = not given
}

// ParseCommand parses and checks a request payload. Verbs and options are
// matched without regard to ASCII case and options may come in any order.
// The checks run in this order, and the error wraps the ServiceError of the
// first that fails: RESP shape (ErrSyntax), verb (ErrUnknownCommand),
// argument count (ErrArity), options (ErrSyntax; a bad SINCE version is
// ErrMalformedTimestamp), empty key (ErrEmptyKey). Key and Value alias
// payload.
//
// Accepted shapes:
//
//	SET <key> <value> [NX|NEX] [PX <ms>]     ms: decimal, > 0
//	GET <key>
//	DEL <key>
//	VDEL <key> <value>
//	KEYNOTIFY <key> [STOP] [PREFIX] [SINCE <hlc>]   (STOP and SINCE exclude each other)
func ParseCommand(payload []byte) (Command, error) {
	var buf [MaxRequestArgs][]byte
	args, err := parseArgs(payload, buf[:0])
	if err != nil {
		return Command{}, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	var c Command
	switch verb := args[0]; {
	case equalFold(verb, "SET"):
		c.Verb = VerbSet
	case equalFold(verb, "GET"):
		c.Verb = VerbGet
	case equalFold(verb, "DEL"):
		c.Verb = VerbDel
	case equalFold(verb, "VDEL"):
		c.Verb = VerbVDel
	case equalFold(verb, "KEYNOTIFY"):
		c.Verb = VerbKeyNotify
	default:
		return Command{}, fmt.Errorf("%w: %q", ErrUnknownCommand, clip(string(verb)))
	}
	switch c.Verb {
	case VerbSet:
		if len(args) < 3 {
			return Command{}, fmt.Errorf("%w: SET takes a key and a value", ErrArity)
		}
		c.Key, c.Value = args[1], args[2]
		if err := c.parseSetOptions(args[3:]); err != nil {
			return Command{}, err
		}
	case VerbGet, VerbDel:
		if len(args) != 2 {
			return Command{}, fmt.Errorf("%w: %s takes one key", ErrArity, c.Verb)
		}
		c.Key = args[1]
	case VerbVDel:
		if len(args) != 3 {
			return Command{}, fmt.Errorf("%w: VDEL takes a key and a value", ErrArity)
		}
		c.Key, c.Value = args[1], args[2]
	case VerbKeyNotify:
		if len(args) < 2 {
			return Command{}, fmt.Errorf("%w: KEYNOTIFY takes a key", ErrArity)
		}
		c.Key = args[1]
		if err := c.parseNotifyOptions(args[2:]); err != nil {
			return Command{}, err
		}
	}
	if len(c.Key) == 0 {
		return Command{}, ErrEmptyKey
	}
	return c, nil
}

func (c *Command) parseSetOptions(opts [][]byte) error {
	seenPX := false
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		switch {
		case equalFold(o, "NX"), equalFold(o, "NEX"):
			if c.Cond != CondNone {
				return fmt.Errorf("%w: more than one of NX and NEX", ErrSyntax)
			}
			c.Cond = CondNX
			if len(o) == 3 {
				c.Cond = CondNEX
			}
		case equalFold(o, "PX"):
			if seenPX {
				return fmt.Errorf("%w: PX given twice", ErrSyntax)
			}
			seenPX = true
			if i+1 == len(opts) {
				return fmt.Errorf("%w: PX without milliseconds", ErrSyntax)
			}
			i++
			ms, ok := parseDigits(string(opts[i]), uint64(maxExpiryMs))
			if !ok || ms == 0 {
				return fmt.Errorf("%w: PX %q is not a whole number of milliseconds in 1..%d", ErrSyntax, clip(string(opts[i])), maxExpiryMs)
			}
			c.Expiry = time.Duration(ms) * time.Millisecond
		default:
			return fmt.Errorf("%w: unknown SET option %q", ErrSyntax, clip(string(o)))
		}
	}
	return nil
}

func (c *Command) parseNotifyOptions(opts [][]byte) error {
	seenSince := false
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		switch {
		case equalFold(o, "STOP"):
			if c.Stop {
				return fmt.Errorf("%w: STOP given twice", ErrSyntax)
			}
			c.Stop = true
		case equalFold(o, "PREFIX"):
			if c.Prefix {
				return fmt.Errorf("%w: PREFIX given twice", ErrSyntax)
			}
			c.Prefix = true
		case equalFold(o, "SINCE"):
			if seenSince {
				return fmt.Errorf("%w: SINCE given twice", ErrSyntax)
			}
			seenSince = true
			if i+1 == len(opts) {
				return fmt.Errorf("%w: SINCE without a version", ErrSyntax)
			}
			i++
			h, err := ParseHLC(string(opts[i]))
			if err != nil {
				return fmt.Errorf("%w: SINCE: %w", ErrMalformedTimestamp, err)
			}
			c.Since = h
		default:
			return fmt.Errorf("%w: unknown KEYNOTIFY option %q", ErrSyntax, clip(string(o)))
		}
	}
	if c.Stop && seenSince {
		return fmt.Errorf("%w: STOP with SINCE", ErrSyntax)
	}
	return nil
}

// AppendRequest appends the canonical request encoding of c to dst: upper
// case, options in the SDKs' order (condition, then PX; STOP, PREFIX,
// SINCE). ParseCommand of the result yields c again.
func (c *Command) AppendRequest(dst []byte) []byte {
	var args [8][]byte
	a := args[:0]
	a = append(a, []byte(c.Verb.String()), c.Key)
	switch c.Verb {
	case VerbSet:
		a = append(a, c.Value)
		switch c.Cond {
		case CondNX:
			a = append(a, []byte("NX"))
		case CondNEX:
			a = append(a, []byte("NEX"))
		}
		if c.Expiry > 0 {
			ms := max(c.Expiry.Milliseconds(), 1) // PX 0 is invalid; a sub-ms expiry becomes 1 ms
			a = append(a, []byte("PX"), strconv.AppendInt(nil, ms, 10))
		}
	case VerbVDel:
		a = append(a, c.Value)
	case VerbKeyNotify:
		if c.Stop {
			a = append(a, []byte("STOP"))
		}
		if c.Prefix {
			a = append(a, []byte("PREFIX"))
		}
		if !c.Since.IsZero() {
			a = append(a, []byte("SINCE"), []byte(c.Since.String()))
		}
	}
	return AppendRequest(dst, a...)
}

// equalFold reports whether b equals the upper-case ASCII word s, ignoring
// ASCII case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
