package mqtt

import (
	"log/slog"
	"sync"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Encoding outgoing packets: into a pooled array (encBufs), on the stack
// (acknowledgements), or straight into a held connection's output
// (appendHeld), then written by writeOut (netio_out.go).

var encBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func putEncBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		encBufs.Put(bp)
	}
}

// sendPublish is send for a PUBLISH, encoded without p escaping (the
// caller checked the client's Maximum Packet Size). While a unit of work
// holds the connection it is encoded straight into the held output
// (appendHeld), otherwise into a pooled array that is then written.
// err is the encoding's (p can never be sent); sent is false also when
// the connection is closing (p goes again on the next connection).
func (c *conn) sendPublish(p *packets.Publish, r *Round) (sent bool, err error) {
	if ok, done := c.appendHeld(p, r); done {
		return ok, nil
	}
	bp := encBufs.Get().(*[]byte)
	defer putEncBuf(bp)
	b, err := packets.AppendPublish((*bp)[:0], p, c.version)
	if err != nil {
		c.logRefusal(slog.LevelError, "mqtt: encode", "packet", "PUBLISH", "err", err) // a message can repeat it: limited
		return false, err
	}
	*bp = b
	if !c.write(b) {
		return false, nil
	}
	c.countSent(r)
	return true, nil
}

// countSent counts a packet sent: in the poller's round r
// (roundstats.go), or at once when r is nil.
func (c *conn) countSent(r *Round) {
	if r != nil {
		r.st.dirty = true
		r.st.packetsOut++
		return
	}
	c.srv.stats.PacketsSent.Add(1)
}

// appendHeld encodes p at the end of the connection's output when
// writeOut would only append it there: a unit of work holds the
// connection (batch.go), the socket has not refused, and the output stays
// within holdMax. That saves the pooled array and the copy of the packet
// a request's response otherwise costs. done is false when p must take
// the ordinary path (writeOut decides what to do with it).
func (c *conn) appendHeld(p *packets.Publish, r *Round) (ok, done bool) {
	if c.tls != nil {
		return false, false
	}
	c.outMu.Lock()
	if c.heldBy == nil || c.blocked || c.wclosed || c.draining {
		c.outMu.Unlock()
		return false, false
	}
	if c.out == nil {
		c.out = getOutBuf()
	}
	orig, start := c.out, len(c.out)
	out, err := packets.AppendPublish(c.out, p, c.version)
	if err != nil || len(out) > c.srv.holdMax {
		// Not kept: the output is as it was (an idle one holds no
		// array), and over holdMax writeOut writes it all at once.
		c.out = orig[:start]
		if start == 0 {
			putOutBuf(orig)
			c.out = nil
		}
		c.outMu.Unlock()
		return false, false // an encoding error is sendPublish's to report
	}
	c.out = out
	c.outMu.Unlock()
	c.countSent(r)
	return true, true
}

// writePacket writes one encoded packet and counts it.
func (c *conn) writePacket(b []byte) bool {
	if !c.write(b) {
		return false
	}
	c.srv.stats.PacketsSent.Add(1)
	return true
}

// sendAckOf is send for a PUBACK, PUBREC, PUBREL or PUBCOMP (t) given by
// its fields (props may be nil), encoded on the stack. Over the client's
// Maximum Packet Size it loses its reason string and user properties, or
// is dropped.
func (c *conn) sendAckOf(t packets.Type, id uint16, code packets.ReasonCode, props *packets.Properties) bool {
	return c.sendAckIn(nil, t, id, code, props)
}

// sendAckIn is sendAckOf counting the packet in the poller's round r
// (nil: at once, countSent).
func (c *conn) sendAckIn(r *Round, t packets.Type, id uint16, code packets.ReasonCode, props *packets.Properties) bool {
	var arr [64]byte
	b, err := packets.AppendAck(arr[:0], t, id, code, props, c.version)
	if err == nil && c.maxOut > 0 && len(b) > int(c.maxOut) && props != nil {
		props.Present.Remove(packets.PropReasonString)
		props.User = nil
		b, err = packets.AppendAck(arr[:0], t, id, code, props, c.version)
	}
	if err != nil {
		c.srv.log.Error("mqtt: encode", "client", c.clientID(), "packet", t.String(), "err", err)
		return false
	}
	if c.maxOut > 0 && len(b) > int(c.maxOut) {
		c.srv.stats.Dropped.Add(1)
		return false
	}
	if !c.write(b) {
		return false
	}
	c.countSent(r)
	return true
}

// send encodes p at the connection's version and writes it. Packets over
// the client's Maximum Packet Size lose their reason string and user
// properties, or are dropped.
func (c *conn) send(p packets.Packet) bool {
	bp := encBufs.Get().(*[]byte)
	defer putEncBuf(bp)
	b, err := packets.AppendPacket((*bp)[:0], p, c.version)
	if err != nil {
		c.srv.log.Error("mqtt: encode", "client", c.clientID(), "packet", p.Type().String(), "err", err)
		return false
	}
	if c.maxOut > 0 && len(b) > int(c.maxOut) {
		if props := propsOf(p); props != nil {
			props.Present.Remove(packets.PropReasonString)
			props.User = nil
			b, err = packets.AppendPacket((*bp)[:0], p, c.version)
		}
		if err != nil || len(b) > int(c.maxOut) {
			c.srv.stats.Dropped.Add(1)
			return false
		}
	}
	*bp = b
	return c.writePacket(b)
}

func propsOf(p packets.Packet) *packets.Properties {
	switch p := p.(type) {
	case *packets.Puback:
		return &p.Properties
	case *packets.Pubrec:
		return &p.Properties
	case *packets.Pubrel:
		return &p.Properties
	case *packets.Pubcomp:
		return &p.Properties
	case *packets.Suback:
		return &p.Properties
	case *packets.Unsuback:
		return &p.Properties
	case *packets.Disconnect:
		return &p.Properties
	case *packets.Connack:
		return &p.Properties
	}
	return nil
}
