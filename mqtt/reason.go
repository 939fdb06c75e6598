package mqtt

import (
	"strings"
	"unicode/utf8"
)

// maxReasonString bounds the reason strings the server sends (CONNACK,
// acknowledgements, DISCONNECT): they carry an error's text for people,
// and a client may have announced a small Maximum Packet Size.
const maxReasonString = 200

// reasonText makes s fit to send as an MQTT 5 reason string. The text of
// an error may hold what a client cannot accept in a UTF-8 string field:
// line breaks (errors.Join puts one between its errors), other control
// characters, which MQTT 5 (1.5.4) says a string should not include and
// clients such as mosquitto refuse as malformed (closing the connection
// instead of reporting the reason code), noncharacters, invalid bytes from
// a topic or a peer. Each of those becomes a space (an invalid byte or a
// noncharacter U+FFFD), and a string longer than maxReasonString is cut at
// the last whole character within it, never inside one.
func reasonText(s string) string {
	clean := true
	for _, r := range s {
		if !reasonRuneOK(r) {
			clean = false
			break
		}
	}
	if clean && len(s) <= maxReasonString {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), maxReasonString))
	for _, r := range s {
		switch {
		case r == utf8.RuneError || isNoncharacter(r):
			r = utf8.RuneError
		case !reasonRuneOK(r):
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > maxReasonString {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// reasonRuneOK reports whether r may stand in a reason string as it is.
// It refuses utf8.RuneError because ranging over a string yields it for an
// invalid byte too; such a rune is rewritten (as U+FFFD, a valid one).
func reasonRuneOK(r rune) bool {
	return r >= 0x20 && (r < 0x7F || r > 0x9F) && r != utf8.RuneError && !isNoncharacter(r)
}

// isNoncharacter reports Unicode's noncharacters (U+FDD0..U+FDEF and the
// last two code points of every plane), which MQTT 5 strings should not
// hold either.
func isNoncharacter(r rune) bool {
	return (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE
}
