package twin

import (
	"encoding/json"
	"time"
)

// Cloud-to-device queue ledger. A device's record keeps the messages
// queued for it that it has not acknowledged yet: their message ids and
// expiries (Unix ms), in the order they were sent. EnqueueC2D adds one
// unless the device already holds its maxDepth unexpired ones (403
// DeviceMaximumQueueDepthExceeded, IoT Hub's refusal of the 51st
// message); AckC2D removes one once the device acknowledged it (the
// oldest of its id: two messages sent with one id count twice, and
// leave with two acknowledgements). Every
// write first drops the entries whose expiry the entry's store time has
// passed; a read counts only those still unexpired by the reading
// node's clock (cloudToDeviceMessageCount): the one place the engine
// reads a clock, for a rendered number that no replicated state depends
// on.

// Limits of the ledger.
const (
	// MaxC2DQueueDepth bounds the maxDepth an EnqueueC2D may ask for.
	MaxC2DQueueDepth = 10000
	// MaxC2DMessageIDBytes bounds a ledger's message id (IoT Hub's 128).
	MaxC2DMessageIDBytes = 128
)

// CodeQueueDepthExceeded is the error code of an EnqueueC2D refused
// because the device holds its most outstanding messages (403).
const CodeQueueDepthExceeded = "DeviceMaximumQueueDepthExceeded"

// C2DEntry is the body of EnqueueC2D (MaxDepth and Expiry read) and
// AckC2D (MessageID only).
type C2DEntry struct {
	MessageID string `json:"messageId"`
	// Expiry is when the message expires, Unix milliseconds (> 0).
	Expiry int64 `json:"expiry,omitempty"`
	// MaxDepth is the most unexpired messages the device may hold
	// (1..MaxC2DQueueDepth).
	MaxDepth int `json:"maxDepth,omitempty"`
}

// c2dItem is one outstanding message of a device.
type c2dItem struct {
	mid    string
	expiry int64 // Unix ms
}

// wallNow is the clock of cloudToDeviceMessageCount (tests replace it).
var wallNow = func() int64 { return time.Now().UnixMilli() }

// c2dCount is the number of r's outstanding messages unexpired at now.
func c2dCount(r *record, now int64) int64 {
	var n int64
	for _, it := range r.c2d {
		if it.expiry > now {
			n++
		}
	}
	return n
}

// prepareC2D checks an EnqueueC2D or AckC2D body into le.
func prepareC2D(req *Request, le *logEntry) *Error {
	var c C2DEntry
	if err := decodeStrict(req.Body, &c); err != nil {
		return err
	}
	if c.MessageID == "" || len(c.MessageID) > MaxC2DMessageIDBytes {
		return invalidf("messageId: %d bytes (1 to %d)", len(c.MessageID), MaxC2DMessageIDBytes)
	}
	le.c2dID = c.MessageID
	if req.Op == OpAckC2D {
		return nil
	}
	if c.Expiry <= 0 {
		return invalidf("expiry: %d is not a positive Unix millisecond time", c.Expiry)
	}
	if c.MaxDepth < 1 || c.MaxDepth > MaxC2DQueueDepth {
		return invalidf("maxDepth: %d not in 1..%d", c.MaxDepth, MaxC2DQueueDepth)
	}
	le.c2dExpiry, le.c2dMax = c.Expiry, c.MaxDepth
	return nil
}

// c2dPending reports whether an AckC2D would change anything: the
// device holds the message. An ack of any other message (one a back end
// produced to the egress topic itself, an expired one) is answered
// without a log entry.
func (e *Engine) c2dPending(req *Request) bool {
	var c C2DEntry
	if json.Unmarshal(req.Body, &c) != nil {
		return true // Prepare's check answers
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	r := e.recs[req.DeviceID]
	if r == nil {
		return true // Apply answers 404
	}
	for _, it := range r.c2d {
		if it.mid == c.MessageID {
			return true
		}
	}
	return false
}

// c2dLocked applies an EnqueueC2D or AckC2D.
func (e *Engine) c2dLocked(le *logEntry, now int64, out *Outcome) {
	r, err := e.lookupLocked(le.deviceID, "")
	if err != nil {
		out.Reply = errReply(err)
		return
	}
	if n := c2dCount(r, now); le.op == OpEnqueueC2D && n >= int64(le.c2dMax) {
		out.Reply = errReply(errf(StatusForbidden, CodeQueueDepthExceeded,
			"device %s holds %d cloud-to-device messages, the most it may (%d)", r.deviceID, n, le.c2dMax))
		return // a refusal changes nothing
	}
	live := r.c2d[:0]
	acked := le.op != OpAckC2D
	for _, it := range r.c2d {
		if it.expiry <= now {
			continue // expired: the device will not get it
		}
		if !acked && it.mid == le.c2dID {
			acked = true // the oldest of that id: ids need not be unique
			continue
		}
		live = append(live, it)
	}
	clear(r.c2d[len(live):])
	r.c2d = live
	if le.op == OpEnqueueC2D && le.c2dExpiry > now {
		r.c2d = append(r.c2d, c2dItem{mid: le.c2dID, expiry: le.c2dExpiry})
	}
	if len(r.c2d) == 0 {
		r.c2d = nil
	}
	out.Reply = Reply{Status: StatusOK, Version: int64(len(r.c2d))}
}
