package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// EncodeJSON marshals a body the way fastjson writes it for Java: struct
// keys in alphabetical order (our body types declare fields that way), map
// keys sorted and quoted, no HTML escaping, no trailing newline.
func EncodeJSON(v any) ([]byte, error) {
	// Bodies holding an MQMap are not standard JSON (object keys), which
	// encoding/json refuses to emit; they write themselves.
	if r, ok := v.(rawJSONBody); ok {
		b, err := r.rawJSON()
		if err != nil {
			return nil, fmt.Errorf("protocol: encode %T: %w", v, err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("protocol: encode %T: %w", v, err)
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil
}

// DecodeJSON unmarshals a body sent by Java or Go clients into v. It first
// quotes bare map keys (fastjson writes non-string keys unquoted, e.g.
// "brokerAddrs":{0:"10.0.0.1:10911"}), then decodes; unknown keys are
// ignored and missing ones left zero. Scalars of the wrong JSON kind are
// converted as fastjson converts them (numbers sent as strings, see
// jsonlenient.go).
func DecodeJSON(b []byte, v any) error {
	if err := unmarshalLenient(quoteObjectKeys(QuoteBareKeys(b)), v); err != nil {
		return fmt.Errorf("%w: %T: %w", ErrBadBody, v, err)
	}
	return nil
}

// ErrNotJSONObject: DecodeJSONObject was given something other than a
// JSON object.
var ErrNotJSONObject = errors.New("protocol: not a JSON object")

// DecodeJSONObject is DecodeJSON for content that is always one JSON
// object, such as a persisted file: null, an array, a scalar or nothing
// at all is refused (DecodeJSON takes null for "no fields" and would
// leave v empty without an error).
func DecodeJSONObject(b []byte, v any) error {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: %T", ErrNotJSONObject, v)
	}
	return DecodeJSON(b, v)
}

// unmarshalLenient is json.Unmarshal, retried with fastjson's scalar
// conversions (decodeLenient) when it fails on a type mismatch.
func unmarshalLenient(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && decodeLenient(b, v) {
		return nil
	}
	return err
}

// QuoteBareKeys returns b with every unquoted object key (a number or a
// bare word, as fastjson writes Integer/Long map keys) wrapped in double
// quotes. If b has no bare key it is returned unchanged, without copying.
// It never fails: malformed input is passed on for json.Unmarshal to
// reject.
func QuoteBareKeys(b []byte) []byte {
	var out []byte // nil until the first rewrite
	last := 0      // b[last:] not yet copied to out
	// stack of container kinds; true = object
	var stackBuf [32]bool
	stack := stackBuf[:0]
	expectKey := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case '"':
			i = skipString(b, i)
			expectKey = false
		case '{':
			stack = append(stack, true)
			expectKey = true
		case '[':
			stack = append(stack, false)
			expectKey = false
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1]
		case ' ', '\t', '\r', '\n':
		default:
			if !expectKey {
				continue
			}
			expectKey = false
			start := i
			for i < len(b) && b[i] != ':' && b[i] != ' ' && b[i] != '\t' && b[i] != '\r' && b[i] != '\n' &&
				b[i] != ',' && b[i] != '}' && b[i] != '"' && b[i] != '{' && b[i] != '[' {
				i++
			}
			if out == nil {
				out = make([]byte, 0, len(b)+16)
			}
			out = append(out, b[last:start]...)
			out = append(out, '"')
			out = append(out, b[start:i]...)
			out = append(out, '"')
			last = i
			i--
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// skipString returns the index of the closing quote of the string that
// opens at b[i] (or len(b)-1 if unterminated).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b) - 1
}

// rawJSONBody is implemented by bodies whose fastjson form encoding/json
// cannot produce (they contain an MQMap).
type rawJSONBody interface{ rawJSON() ([]byte, error) }

func (c ConsumeStats) rawJSON() ([]byte, error) {
	tps, err := json.Marshal(c.ConsumeTps)
	if err != nil {
		return nil, err
	}
	table, err := c.OffsetTable.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := append([]byte(`{"consumeTps":`), tps...)
	out = append(out, `,"offsetTable":`...)
	out = append(out, table...)
	return append(out, '}'), nil
}

func (t TopicStatsTable) rawJSON() ([]byte, error) {
	table, err := t.OffsetTable.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := append([]byte(`{"offsetTable":`), table...)
	return append(out, '}'), nil
}

// quoteObjectKeys rewrites object keys that are themselves objects (the
// fastjson form of MessageQueue-keyed maps, see MQMap) as JSON strings
// holding the key's text, which MQMap.UnmarshalJSON accepts and which
// encoding/json can parse. Input without such keys is returned unchanged.
func quoteObjectKeys(b []byte) []byte {
	var out []byte
	last := 0
	var stack []bool // true = object
	expectKey := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			i = skipString(b, i)
		case '{':
			if expectKey && len(stack) > 0 && stack[len(stack)-1] {
				end := skipValue(b, i)
				if end < 0 {
					return b
				}
				q, err := json.Marshal(string(b[i:end]))
				if err != nil {
					return b
				}
				out = append(out, b[last:i]...)
				out = append(out, q...)
				last = end
				i = end - 1
				expectKey = false
				continue
			}
			stack = append(stack, true)
			expectKey = true
		case '[':
			stack = append(stack, false)
			expectKey = false
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ':':
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1]
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// skipValue returns the end (exclusive) of the balanced object or array
// starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			j = skipString(b, j)
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}
