package protocol

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Properties text bodies.
//
// UPDATE_BROKER_CONFIG, GET_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG and
// GET_NAMESRV_CONFIG carry configuration as Java properties text, one
// "key=value" per line (RocketMQ writes it with MixAll.properties2String
// and reads it with java.util.Properties.load):
//
//	brokerPermission=6
//	autoCreateTopicEnable=true
//
// EncodeProperties writes the keys sorted, "key=value\n" each, without
// escapes (as RocketMQ does). DecodeProperties reads what Java writes and
// the common hand-written forms: blank lines and lines starting with '#'
// or '!' are skipped, the key ends at the first '=' or ':' (or, without
// either, at the first blank), blanks around key and value are dropped,
// a later line overrides an earlier one. Backslash escapes and line
// continuations are not interpreted (RocketMQ never writes them).

// EncodeProperties returns m as properties text, keys sorted.
func EncodeProperties(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// DecodeProperties parses properties text. It fails (ErrBadBody) only on
// text that is not UTF-8 or a line without a key.
func DecodeProperties(b []byte) (map[string]string, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: properties text is not UTF-8", ErrBadBody)
	}
	m := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			i = strings.IndexAny(line, " \t\f")
		}
		key, value := line, ""
		if i >= 0 {
			key, value = line[:i], line[i+1:]
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if key == "" {
			return nil, fmt.Errorf("%w: properties line %d has no key: %q", ErrBadBody, n+1, line)
		}
		m[key] = value
	}
	return m, nil
}
