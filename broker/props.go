package broker

import (
	"bytes"
	"strconv"
	"strings"
	"unsafe"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Properties the broker rewrites before storing a message.
//
// WAIT ("wait for the flush or the slave before answering") is a request
// flag, not message data: RocketMQ's broker drops it from what it stores,
// and so does SmartGo, on every path that writes a record (send, batch,
// send-back, delay re-put), so consumers never see it. CLUSTER names the
// storing broker's cluster and replaces whatever the producer put there.

// sendProps is what the broker needs from a send's properties, read in
// the same pass that writes them as stored (appendStoredProperties): the
// first pair of each key that RocketMQ's parser accepts (non-empty key and
// value; record.LookupPropertyString finds the same), WAIT from any pair.
type sendProps struct {
	wait     bool   // WAIT: true unless "false"
	half     bool   // TRAN_MSG is "true" (any case): a transaction's half message
	hasDelay bool   // a DELAY pair
	delay    string // its value (aliases the input)
	// replyTo: REPLY_TO_CLIENT of a request (aliases the input; empty
	// for a reply, MSG_TYPE=reply, and for any other message).
	replyTo string
	reply   bool // MSG_TYPE is "reply"
	// Where the values of record.KnownKeys (TAGS, KEYS, UNIQ_KEY) are in
	// the stored properties (offsets in what appendStoredProperties
	// returned; {0, 0} for none), as the store would look them up: handed
	// on to it with the message (record.Know).
	known [len(record.KnownKeys)][2]int
}

// appendStoredProperties appends props as the broker stores them to dst:
// WAIT removed, CLUSTER=cluster last (replacing any CLUSTER pair). Other
// pairs keep their order and bytes; empty chunks are dropped. A half
// message (TRAN_MSG=true) without a PGROUP pair gets PGROUP=group (when
// group is not empty) before CLUSTER. One pass, no allocation when dst
// has room.
func appendStoredProperties(dst []byte, props, cluster, group string) ([]byte, sendProps) {
	var info sendProps
	dst = appendStoredPropertiesTo(dst, &info, props, cluster, group)
	return dst, info
}

// appendStoredPropertiesTo is appendStoredProperties setting *info in
// place: a sendProps returned by value is copied with 16-byte loads over
// the narrower stores that just wrote it, which the CPU does not forward
// (a wait for its store buffer to drain; a send's hot path).
func appendStoredPropertiesTo(dst []byte, info *sendProps, props, cluster, group string) []byte {
	*info = sendProps{}
	info.wait = true
	w := storedPass{info: info}
	start := len(dst)
	for rest := props; rest != ""; {
		var chunk string
		if i := strings.IndexByte(rest, record.PropertySeparator); i >= 0 {
			chunk, rest = rest[:i], rest[i+1:]
		} else {
			chunk, rest = rest, ""
		}
		if chunk == "" {
			continue
		}
		k, v, _ := strings.Cut(chunk, string(record.NameValueSeparator))
		if w.keep(k, v, len(dst)) {
			dst = append(dst, chunk...)
			dst = append(dst, record.PropertySeparator)
		}
	}
	if w.info.half && !w.hasGroup && group != "" {
		// Rare: once more with the pair appended, so that a group
		// holding separators is read as any other pairs are.
		return appendStoredPropertiesTo(dst[:start], info, appendProperty(props, record.PropertyProducerGroup, group), cluster, "")
	}
	return w.finish(dst, cluster)
}

// appendStoredPropertiesEscaped is appendStoredProperties of the
// properties esc, as a send's JSON header wrote them with no escapes but
// the separators' (\u0001, \u0002; protocol.DecodeSendHeaderEscaped):
// each pair is unescaped into dst and dropped again when it is not
// stored. One pass, no allocation when dst has room.
func appendStoredPropertiesEscaped(dst []byte, esc, cluster, group string) ([]byte, sendProps) {
	var info sendProps
	dst = appendStoredPropertiesEscapedTo(dst, &info, esc, cluster, group)
	return dst, info
}

// appendStoredPropertiesEscapedTo is appendStoredPropertiesEscaped
// setting *info in place (see appendStoredPropertiesTo).
func appendStoredPropertiesEscapedTo(dst []byte, info *sendProps, esc, cluster, group string) []byte {
	*info = sendProps{}
	info.wait = true
	w := storedPass{info: info}
	start := len(dst)
	for rest := esc; rest != ""; {
		c0, kv := len(dst), -1 // kv: the chunk's first name-value separator
		for {
			i := strings.IndexByte(rest, '\\')
			if i < 0 || len(rest) < i+6 {
				dst, rest = append(dst, rest...), ""
				break
			}
			dst = append(dst, rest[:i]...)
			sep := rest[i+5] - '0' // \u000X: X is 1 or 2
			rest = rest[i+6:]
			if sep == record.PropertySeparator {
				break
			}
			if kv < 0 {
				kv = len(dst)
			}
			dst = append(dst, sep)
		}
		if len(dst) == c0 {
			continue
		}
		chunk := unsafe.String(&dst[c0], len(dst)-c0) // dst is not written there again when kept
		k, v := chunk, ""
		if kv >= 0 {
			k, v = chunk[:kv-c0], chunk[kv-c0+1:]
		}
		if w.keep(k, v, c0) {
			dst = append(dst, record.PropertySeparator)
		} else {
			dst = dst[:c0]
		}
	}
	if w.info.half && !w.hasGroup && group != "" {
		// Rare: unescaped, then as above.
		b := protocol.AppendSeparatorsUnescaped(nil, esc)
		return appendStoredPropertiesTo(dst[:start], info, unsafe.String(unsafe.SliceData(b), len(b)), cluster, group)
	}
	return w.finish(dst, cluster)
}

// storedPass is what appendStoredProperties notes of the pairs it read.
type storedPass struct {
	info     *sendProps
	seen     bool // TRAN_MSG
	seenType bool // MSG_TYPE
	hasGroup bool
}

// keep notes the pair k=v, whose value starts at off+len(k)+1 of the
// stored properties if it is stored, and reports whether it is.
func (w *storedPass) keep(k, v string, off int) bool {
	info := w.info
	switch k {
	case record.PropertyWaitStoreMsgOK:
		info.wait = v != "false"
		return false
	case record.PropertyCluster:
		return false
	case record.PropertyTransactionPrepared:
		if !w.seen && v != "" {
			w.seen, info.half = true, strings.EqualFold(v, "true")
		}
	case record.PropertyProducerGroup:
		w.hasGroup = w.hasGroup || v != ""
	case record.PropertyDelayLevel:
		if !info.hasDelay && v != "" {
			info.hasDelay, info.delay = true, v
		}
	case record.PropertyReplyToClient:
		if info.replyTo == "" {
			info.replyTo = v
		}
	case record.PropertyMsgType:
		if !w.seenType && v != "" {
			w.seenType, info.reply = true, v == protocol.ReplyMessageFlag
		}
	case record.PropertyTags:
		info.noteKnown(0, off+len(k)+1, v)
	case record.PropertyKeys:
		info.noteKnown(1, off+len(k)+1, v)
	case record.PropertyUniqueClientMessageIDKeyIndex:
		info.noteKnown(2, off+len(k)+1, v)
	}
	return true
}

// finish appends CLUSTER=cluster to the stored pairs dst and settles
// what the pass noted.
func (w *storedPass) finish(dst []byte, cluster string) []byte {
	if w.info.reply {
		w.info.replyTo = ""
	}
	dst = append(dst, record.PropertyCluster...)
	dst = append(dst, record.NameValueSeparator)
	return append(dst, cluster...)
}

// noteKnown notes v, at off in the stored properties, as the value of
// record.KnownKeys[i] unless one was noted already (the first non-empty
// pair counts).
func (p *sendProps) noteKnown(i, off int, v string) {
	if v != "" && p.known[i][1] == 0 {
		p.known[i] = [2]int{off, off + len(v)}
	}
}

// storedProperties returns props as the broker stores them
// (appendStoredProperties without a producer group) and whether WAIT asked
// to wait. One allocation.
func storedProperties(props, cluster string) (out string, wait bool) {
	b, info := appendStoredProperties(make([]byte, 0, len(props)+len(record.PropertyCluster)+len(cluster)+2), props, cluster, "")
	return unsafe.String(unsafe.SliceData(b), len(b)), info.wait // b is not written again
}

var waitKey = []byte(record.PropertyWaitStoreMsgOK + string(record.NameValueSeparator))

// stripWaitInPlace removes every WAIT pair from a batch item's properties
// by moving the bytes after it down, and returns the shortened slice (same
// backing array: the request body the item points into). It does not
// allocate; properties without WAIT are returned as they are.
func stripWaitInPlace(p []byte) []byte {
	if !bytes.Contains(p, waitKey) {
		return p
	}
	out := p[:0]
	for rest := p; len(rest) > 0; {
		chunk := rest
		next := len(rest)
		if i := bytes.IndexByte(rest, record.PropertySeparator); i >= 0 {
			chunk, next = rest[:i], i+1
		}
		if len(chunk) > 0 && !bytes.HasPrefix(chunk, waitKey) {
			if len(out) > 0 {
				out = append(out, record.PropertySeparator)
			}
			out = append(out, chunk...) // never overtakes rest: out only shrinks
		}
		rest = rest[next:]
	}
	return out
}

// hasDelayLevel reports whether a message's properties ask for a delay:
// a DELAY property that is not a number or is a positive level (as
// divertDelayedBy reads it for a single message).
func hasDelayLevel(p []byte) bool {
	v, ok := record.LookupProperty(p, record.PropertyDelayLevel)
	if !ok {
		return false
	}
	level, err := strconv.Atoi(string(v))
	return err != nil || level > 0
}
