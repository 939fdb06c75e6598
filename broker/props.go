package broker

import (
	"bytes"
	"strings"

	"github.com/smartgo/smartgo/store/record"
)

// Properties the broker rewrites before storing a message.
//
// WAIT ("wait for the flush or the slave before answering") is a request
// flag, not message data: RocketMQ's broker drops it from what it stores,
// and so does SmartGo, on every path that writes a record (send, batch,
// send-back, delay re-put), so consumers never see it. CLUSTER names the
// storing broker's cluster and replaces whatever the producer put there.

// storedProperties returns props as the broker stores them: WAIT removed,
// CLUSTER=cluster last (replacing any CLUSTER pair). wait is what WAIT
// asked for: true unless it was "false". Other pairs keep their order and
// bytes; empty chunks are dropped. One allocation.
func storedProperties(props, cluster string) (out string, wait bool) {
	wait = true
	var sb strings.Builder
	sb.Grow(len(props) + len(record.PropertyCluster) + len(cluster) + 2)
	for rest := props; rest != ""; {
		var chunk string
		chunk, rest, _ = strings.Cut(rest, string(record.PropertySeparator))
		if chunk == "" {
			continue
		}
		k, v, _ := strings.Cut(chunk, string(record.NameValueSeparator))
		switch k {
		case record.PropertyWaitStoreMsgOK:
			wait = v != "false"
			continue
		case record.PropertyCluster:
			continue
		}
		sb.WriteString(chunk)
		sb.WriteByte(record.PropertySeparator)
	}
	sb.WriteString(record.PropertyCluster)
	sb.WriteByte(record.NameValueSeparator)
	sb.WriteString(cluster)
	return sb.String(), wait
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
