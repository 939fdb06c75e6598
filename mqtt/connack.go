package mqtt

import (
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// connackFor builds the CONNACK accepting a connect (Session Present is
// set later, once the session is known): for a v5 client its properties
// say the server's limits and what it decided for the client (assigned
// id, keep alive, session expiry).
func (c *conn) connackFor(id string, assigned bool, ka time.Duration, serverKA bool,
	expiry time.Duration, expirySent bool) *packets.Connack {
	ack := &packets.Connack{}
	if c.version != packets.Version5 {
		return ack
	}
	o := &c.srv.opts
	ap := &ack.Properties
	ap.Present = ap.Present | propSet(packets.PropReceiveMaximum, packets.PropMaximumPacketSize,
		packets.PropTopicAliasMaximum, packets.PropRetainAvailable, packets.PropWildcardSubAvailable,
		packets.PropSubIDAvailable, packets.PropSharedSubAvailable)
	ap.ReceiveMaximum = uint16(o.ReceiveMaximum)
	ap.MaximumPacketSize = uint32(o.MaxPacketSize)
	ap.TopicAliasMaximum = uint16(o.TopicAliasMaximum)
	ap.RetainAvailable, ap.WildcardSubAvail, ap.SubIDAvailable, ap.SharedSubAvailable = 1, 1, 1, 1
	if assigned {
		ap.Present.Add(packets.PropAssignedClientID)
		ap.AssignedClientID = id
	}
	if serverKA {
		ap.Present.Add(packets.PropServerKeepAlive)
		ap.ServerKeepAlive = uint16(ka / time.Second)
	}
	if expirySent {
		ap.Present.Add(packets.PropSessionExpiry)
		ap.SessionExpiry = secs(expiry)
	}
	return ack
}

// fitConnack sheds from a CONNACK over the client's Maximum Packet Size
// the properties a client may go without, so that one with a small
// maximum still learns it is connected (MQTT-3.1.2-24: the server sends
// no packet over it): first the four "available" flags, whose absence
// means the same 1, then Topic Alias Maximum (absent: 0, so a client
// sends no alias; one that does anyway is still served). What is left
// (receive maximum, maximum packet size, assigned id, keep alive, expiry)
// the client must know: fitConnack reports false when the CONNACK is
// still too large, and the connect is refused (handleConnect) before it
// touches any session.
func (c *conn) fitConnack(ack *packets.Connack) bool {
	if c.maxOut <= 0 {
		return true
	}
	var arr [128]byte
	fits := func() bool {
		b, err := packets.AppendPacket(arr[:0], ack, packets.Version5)
		return err == nil && len(b) <= int(c.maxOut)
	}
	if fits() {
		return true
	}
	ap := &ack.Properties
	for _, id := range []packets.PropID{packets.PropRetainAvailable, packets.PropWildcardSubAvailable,
		packets.PropSubIDAvailable, packets.PropSharedSubAvailable} {
		ap.Present.Remove(id)
	}
	if fits() {
		return true
	}
	ap.Present.Remove(packets.PropTopicAliasMaximum)
	return fits()
}
