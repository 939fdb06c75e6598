package record

import (
	"bytes"
	"fmt"
	"iter"
	"strings"
	"unsafe"
)

// Properties string separators (frozen).
const (
	NameValueSeparator = '\x01' // between a key and its value
	PropertySeparator  = '\x02' // between key/value pairs
)

// Well-known property keys (frozen; protocol section 3.3).
const (
	PropertyKeys                          = "KEYS"
	PropertyTags                          = "TAGS"
	PropertyWaitStoreMsgOK                = "WAIT"
	PropertyDelayLevel                    = "DELAY"
	PropertyRetryTopic                    = "RETRY_TOPIC"
	PropertyRealTopic                     = "REAL_TOPIC"
	PropertyRealQueueID                   = "REAL_QID"
	PropertyTransactionPrepared           = "TRAN_MSG"
	PropertyProducerGroup                 = "PGROUP"
	PropertyMinOffset                     = "MIN_OFFSET"
	PropertyMaxOffset                     = "MAX_OFFSET"
	PropertyBuyerID                       = "BUYER_ID"
	PropertyOriginMessageID               = "ORIGIN_MESSAGE_ID"
	PropertyTransferFlag                  = "TRANSFER_FLAG"
	PropertyCorrectionFlag                = "CORRECTION_FLAG"
	PropertyMQ2Flag                       = "MQ2_FLAG"
	PropertyReconsumeTime                 = "RECONSUME_TIME"
	PropertyMsgRegion                     = "MSG_REGION"
	PropertyTraceSwitch                   = "TRACE_ON"
	PropertyUniqueClientMessageIDKeyIndex = "UNIQ_KEY"
	PropertyMaxReconsumeTimes             = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTimestamp         = "CONSUME_START_TIME"
	PropertyTranPreparedQueueOffset       = "TRAN_PREPARED_QUEUE_OFFSET"
	PropertyTransactionCheckTimes         = "TRANSACTION_CHECK_TIMES"
	PropertyCheckImmunityTimeInSeconds    = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyInstanceID                    = "INSTANCE_ID"
	PropertyCorrelationID                 = "CORRELATION_ID"
	PropertyReplyToClient                 = "REPLY_TO_CLIENT"
	PropertyTTL                           = "TTL"
	PropertyArriveTime                    = "ARRIVE_TIME"
	PropertyPushReplyTime                 = "PUSH_REPLY_TIME"
	PropertyMsgType                       = "MSG_TYPE"
	PropertyCluster                       = "CLUSTER"
	PropertyInnerMultiDispatch            = "INNER_MULTI_DISPATCH"
	PropertyInnerMultiQueueOffset         = "INNER_MULTI_QUEUE_OFFSET"
)

// KeySeparator separates business keys inside the KEYS property value.
const KeySeparator = " "

// Property is one key/value pair of a properties string.
type Property struct{ Key, Value string }

// Properties is an ordered property set. Parsing keeps pairs in input order,
// duplicates included; Get returns the first match (as LookupProperty does;
// note Java's parser keeps the last duplicate — writers here never produce
// duplicates because Set replaces in place).
type Properties []Property

// Get returns the value of the first pair with key.
func (p Properties) Get(key string) (string, bool) {
	for i := range p {
		if p[i].Key == key {
			return p[i].Value, true
		}
	}
	return "", false
}

// Set replaces the value of the first pair with key (removing any later
// duplicates), or appends a new pair.
func (p *Properties) Set(key, value string) {
	for i := range *p {
		if (*p)[i].Key == key {
			(*p)[i].Value = value
			rest := (*p)[i+1:]
			*p = append((*p)[:i+1], deleteKey(rest, key)...)
			return
		}
	}
	*p = append(*p, Property{Key: key, Value: value})
}

// Del removes every pair with key.
func (p *Properties) Del(key string) {
	*p = deleteKey(*p, key)
}

// deleteKey filters pairs with key out of p in place.
func deleteKey(p Properties, key string) Properties {
	out := p[:0]
	for _, kv := range p {
		if kv.Key != key {
			out = append(out, kv)
		}
	}
	clear(p[len(out):])
	return out
}

// Validate reports (wrapping ErrBadProperties or ErrPropertiesTooLong) a set
// that would not survive encoding and parsing: an empty key or value (Java's
// parser drops such pairs), a key or value holding 0x01 or 0x02, or an
// encoded length above MaxPropertiesLen.
func (p Properties) Validate() error {
	n := 0
	for i, kv := range p {
		if kv.Key == "" || kv.Value == "" {
			return fmt.Errorf("%w: pair %d (%q) has an empty key or value", ErrBadProperties, i, kv.Key)
		}
		if strings.ContainsAny(kv.Key, "\x01\x02") || strings.ContainsAny(kv.Value, "\x01\x02") {
			return fmt.Errorf("%w: pair %d (%q) holds a separator byte", ErrBadProperties, i, kv.Key)
		}
		if i > 0 {
			n++
		}
		n += len(kv.Key) + 1 + len(kv.Value)
	}
	if n > MaxPropertiesLen {
		return fmt.Errorf("%w: %d bytes, max %d", ErrPropertiesTooLong, n, MaxPropertiesLen)
	}
	return nil
}

// EncodedLen returns len(AppendProperties(nil, p)).
func (p Properties) EncodedLen() int {
	n := 0
	for i, kv := range p {
		if i > 0 {
			n++
		}
		n += len(kv.Key) + 1 + len(kv.Value)
	}
	return n
}

// String returns the encoded properties string.
func (p Properties) String() string {
	return string(AppendProperties(make([]byte, 0, p.EncodedLen()), p))
}

// AppendProperties appends the encoding of p to dst: key 0x01 value pairs
// joined by 0x02, without a trailing 0x02. It rejects nothing; callers that
// take pairs from untrusted sources run Validate first.
func AppendProperties(dst []byte, p Properties) []byte {
	for i, kv := range p {
		if i > 0 {
			dst = append(dst, PropertySeparator)
		}
		dst = append(dst, kv.Key...)
		dst = append(dst, NameValueSeparator)
		dst = append(dst, kv.Value...)
	}
	return dst
}

// ParseProperties parses a properties string with Java's rules: split on
// 0x02; a chunk yields a pair only if it splits at its first 0x01 into a
// non-empty key and a non-empty value; other chunks (empty ones from a
// trailing or doubled 0x02 included) are skipped. It never fails on content
// (the error is reserved) and never panics.
func ParseProperties(s string) (Properties, error) {
	var p Properties
	for pos := 0; ; {
		k0, k1, v1, next, ok := nextPair(s, pos)
		if !ok {
			return p, nil
		}
		p = append(p, Property{Key: s[k0:k1], Value: s[k1+1 : v1]})
		pos = next
	}
}

// AllProperties yields the pairs ParseProperties would return, in order
// (duplicates included), as substrings of s. It does not allocate.
func AllProperties(s string) iter.Seq2[string, string] {
	return func(yield func(key, value string) bool) {
		for pos := 0; ; {
			k0, k1, v1, next, ok := nextPair(s, pos)
			if !ok || !yield(s[k0:k1], s[k1+1:v1]) {
				return
			}
			pos = next
		}
	}
}

// nextPair finds the next pair Java's parser accepts at or after pos:
// key = s[k0:k1], value = s[k1+1:v1]; scanning continues at next.
func nextPair(s string, pos int) (k0, k1, v1, next int, ok bool) {
	for pos < len(s) {
		end := strings.IndexByte(s[pos:], PropertySeparator)
		if end < 0 {
			end = len(s)
		} else {
			end += pos
		}
		sep := strings.IndexByte(s[pos:end], NameValueSeparator)
		if sep > 0 && pos+sep < end-1 {
			return pos, pos + sep, end, end + 1, true
		}
		pos = end + 1
	}
	return 0, 0, 0, len(s), false
}

// LookupProperty returns the value of the first pair with key in a raw
// properties string, using ParseProperties' rules. It does not allocate.
func LookupProperty(raw []byte, key string) (value []byte, ok bool) {
	s := unsafe.String(unsafe.SliceData(raw), len(raw)) // read-only view
	_, k1, v1, ok := lookup(s, key)
	if !ok {
		return nil, false
	}
	return raw[k1+1 : v1 : v1], true
}

// LookupPropertyString is LookupProperty for a string.
func LookupPropertyString(raw, key string) (value string, ok bool) {
	_, k1, v1, ok := lookup(raw, key)
	if !ok {
		return "", false
	}
	return raw[k1+1 : v1], true
}

// KnownProperties tell where the values of TAGS, KEYS and UNIQ_KEY are
// in a properties string, as LookupProperties finds them there, found by
// whoever built that string in a pass over its pairs it made anyway (a
// broker rewriting a send's properties), so that a store putting the
// message need not look them up again (it takes them for its consume
// queues and index). They hold no copy of the string, only its address,
// its length and the values' places (24 bytes).
type KnownProperties struct {
	of   *byte  // the string's bytes
	n    uint32 // its length
	vals [len(KnownKeys)]struct{ off, n uint16 }
}

// KnownKeys are the keys KnownProperties know, in the order of their
// values.
var KnownKeys = [...]string{PropertyTags, PropertyKeys, PropertyUniqueClientMessageIDKeyIndex}

// Know returns the KnownProperties of props whose value of KnownKeys[i]
// is props[at[i][0]:at[i][1]], or none when that span is empty. Spans
// outside props, and a string longer than MaxPropertiesLen, give the zero
// KnownProperties, which describe no string.
func Know(props string, at [len(KnownKeys)][2]int) KnownProperties {
	var k KnownProperties
	k.Set(props, at)
	return k
}

// Set makes k Know(props, at) in place: a KnownProperties returned by
// value is copied with 16-byte loads over the 2-byte stores that just
// wrote it, which the CPU does not forward (a wait for its store buffer
// to drain, on a broker's send path).
func (k *KnownProperties) Set(props string, at [len(KnownKeys)][2]int) {
	*k = KnownProperties{}
	if len(props) == 0 || len(props) > MaxPropertiesLen {
		return
	}
	for i, a := range at {
		if a[0] < 0 || a[1] > len(props) || a[0] > a[1] {
			*k = KnownProperties{}
			return
		}
		k.vals[i].off, k.vals[i].n = uint16(a[0]), uint16(a[1]-a[0])
	}
	k.of, k.n = unsafe.StringData(props), uint32(len(props))
}

// Values returns the values k knows in props ("" for a key with no pair:
// values found are never empty) when k describes props: the very string
// k was made for (the same bytes at the same address, not merely equal
// ones), so that they never describe a string built or rewritten since (a
// delayed message's new properties, the zero KnownProperties of a message
// read back). ok is false otherwise.
func (k *KnownProperties) Values(props string) (vals [len(KnownKeys)]string, ok bool) {
	if k.of == nil || uint32(len(props)) != k.n || unsafe.StringData(props) != k.of {
		return vals, false
	}
	for i, v := range k.vals {
		vals[i] = props[v.off : v.off+v.n]
	}
	return vals, true
}

// LookupProperties is LookupProperty for several keys in one pass over
// raw: vals[i] is the value of the first pair with keys[i], nil when there
// is none (values are never empty). It does not allocate.
func LookupProperties(raw []byte, keys []string, vals [][]byte) {
	s := unsafe.String(unsafe.SliceData(raw), len(raw)) // read-only view
	clear(vals)
	left := len(keys)
	for pos := 0; left > 0; {
		k0, k1, v1, next, ok := nextPair(s, pos)
		if !ok {
			return
		}
		for i, k := range keys {
			if vals[i] == nil && s[k0:k1] == k {
				vals[i] = raw[k1+1 : v1 : v1]
				left--
			}
		}
		pos = next
	}
}

func lookup(s, key string) (k0, k1, v1 int, ok bool) {
	for pos := 0; ; {
		k0, k1, v1, next, ok := nextPair(s, pos)
		if !ok {
			return 0, 0, 0, false
		}
		if s[k0:k1] == key {
			return k0, k1, v1, true
		}
		pos = next
	}
}

// ForEachKey calls fn for each non-empty space-separated key in a KEYS value.
// It does not allocate.
func ForEachKey(keys []byte, fn func(key []byte)) {
	for len(keys) > 0 {
		i := bytes.IndexByte(keys, KeySeparator[0])
		if i < 0 {
			fn(keys)
			return
		}
		if i > 0 {
			fn(keys[:i])
		}
		keys = keys[i+1:]
	}
}
