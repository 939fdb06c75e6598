package packets

import (
	"math/bits"
	"math/rand/v2"
	"strings"
)

// gen builds random valid packets. pahoSafe restricts them to what
// paho.golang/packets can represent: at most one subscription identifier, no
// empty string or binary properties (it treats those as absent) and, for the
// paho-encodes direction, will properties it writes (see pahoWillSafe).
type gen struct {
	r            *rand.Rand
	pahoSafe     bool
	pahoWillSafe bool
}

func newGen(seed uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, 0x5eed))} }

func (g *gen) chance(n int) bool { return g.r.IntN(n) == 0 }

var runePool = []rune("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 -_.:éüß日本語🙂")

func (g *gen) str(maxLen int, allowEmpty bool) string {
	n := g.r.IntN(maxLen + 1)
	if n == 0 && !allowEmpty {
		n = 1
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(runePool[g.r.IntN(len(runePool))])
	}
	return b.String()
}

func (g *gen) bytes(maxLen int, allowEmpty bool) []byte {
	n := g.r.IntN(maxLen + 1)
	if n == 0 && !allowEmpty {
		n = 1
	}
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return b
}

func (g *gen) topic() string {
	levels := 1 + g.r.IntN(4)
	parts := make([]string, levels)
	for i := range parts {
		parts[i] = strings.NewReplacer("/", "", "+", "", "#", "").Replace(g.str(6, i > 0))
	}
	if g.chance(8) {
		parts[0] = "$SYS"
	}
	t := strings.Join(parts, "/")
	if t == "" {
		t = "t"
	}
	return t
}

func (g *gen) filter() string {
	parts := strings.Split(g.topic(), "/")
	for i := range parts {
		if g.chance(4) {
			parts[i] = "+"
		}
	}
	if g.chance(3) {
		parts = append(parts, "#")
	}
	f := strings.Join(parts, "/")
	if g.chance(6) {
		f = "$share/grp" + string(rune('a'+g.r.IntN(26))) + "/" + f
	}
	return f
}

func (g *gen) qos() byte { return byte(g.r.IntN(3)) }

func (g *gen) packetID() uint16 { return uint16(1 + g.r.IntN(65535)) }

func (g *gen) props(t Type, will bool) Properties {
	var p Properties
	allowed := allowedFor(t, will)
	if will && g.pahoWillSafe {
		allowed &= setOf(PropWillDelay, PropUser)
	}
	for m := uint64(allowed); m != 0; m &= m - 1 {
		id := PropID(bits.TrailingZeros64(m))
		if !g.chance(3) {
			continue
		}
		switch id {
		case PropUser:
			for n := 1 + g.r.IntN(3); n > 0; n-- {
				k := g.str(5, !g.pahoSafe)
				p.User = append(p.User, UserProperty{Key: k, Value: g.str(5, true)})
				if g.chance(3) {
					p.User = append(p.User, UserProperty{Key: k, Value: g.str(5, true)}) // duplicate key
				}
			}
			continue
		case PropSubscriptionIdentifier:
			n := 1
			if t == TypePublish && !g.pahoSafe {
				n += g.r.IntN(3)
			}
			for ; n > 0; n-- {
				p.SubscriptionIdentifiers = append(p.SubscriptionIdentifiers, uint32(1+g.r.IntN(MaxVarInt)))
			}
			continue
		}
		p.Present.Add(id)
		switch propKinds[id] {
		case kindByte:
			*p.byteValue(id) = byte(g.r.IntN(2))
		case kindU16:
			*p.u16Value(id) = uint16(1 + g.r.IntN(65535))
		case kindU32:
			*p.u32Value(id) = 1 + g.r.Uint32N(1<<32-1)
		case kindString:
			if id == PropResponseTopic {
				*p.stringValue(id) = g.topic()
			} else {
				*p.stringValue(id) = g.str(8, !g.pahoSafe)
			}
		case kindBinary:
			*p.binaryValue(id) = g.bytes(8, !g.pahoSafe)
		}
	}
	if p.Present.Has(PropAuthData) && !p.Present.Has(PropAuthMethod) {
		p.Present.Add(PropAuthMethod)
		p.AuthMethod = "SCRAM-SHA-1"
	}
	return p
}

func (g *gen) reason(t Type, v Version) ReasonCode {
	for {
		rc := ReasonCode(g.r.IntN(256))
		if g.chance(2) {
			rc = 0
		}
		if ValidReasonCode(t, v, rc) {
			return rc
		}
	}
}

func (g *gen) packet(t Type, v Version) Packet {
	v5 := v == Version5
	props := func(t Type) Properties {
		if !v5 {
			return Properties{}
		}
		return g.props(t, false)
	}
	switch t {
	case TypeConnect:
		c := &Connect{Version: v, CleanStart: g.chance(2), KeepAlive: uint16(g.r.IntN(65536)),
			Properties: props(t), ClientID: g.str(10, true)}
		if g.chance(2) {
			c.WillFlag, c.WillQoS, c.WillRetain = true, g.qos(), g.chance(2)
			c.WillTopic, c.WillPayload = g.topic(), g.bytes(10, true)
			if v5 {
				c.WillProperties = g.props(t, true)
			}
		}
		c.UsernameFlag = g.chance(2)
		if c.UsernameFlag {
			c.Username = g.str(6, true)
		}
		c.PasswordFlag = g.chance(2) && (v5 || c.UsernameFlag)
		if c.PasswordFlag {
			c.Password = g.bytes(6, true)
		}
		return c
	case TypeConnack:
		c := &Connack{ReasonCode: g.reason(t, v), Properties: props(t)}
		c.SessionPresent = c.ReasonCode == 0 && g.chance(2)
		return c
	case TypePublish:
		p := &Publish{QoS: g.qos(), Retain: g.chance(2), Topic: g.topic(), Properties: props(t),
			Payload: g.bytes(40, true)}
		if p.QoS > 0 {
			p.PacketID, p.Dup = g.packetID(), g.chance(3)
		}
		if p.Properties.Present.Has(PropTopicAlias) && g.chance(2) {
			p.Topic = ""
		}
		return p
	case TypePuback, TypePubrec, TypePubrel, TypePubcomp:
		id, rc, pr := g.packetID(), ReasonCode(0), props(t)
		if v5 {
			rc = g.reason(t, v)
		}
		switch t {
		case TypePuback:
			return &Puback{PacketID: id, ReasonCode: rc, Properties: pr}
		case TypePubrec:
			return &Pubrec{PacketID: id, ReasonCode: rc, Properties: pr}
		case TypePubrel:
			return &Pubrel{PacketID: id, ReasonCode: rc, Properties: pr}
		}
		return &Pubcomp{PacketID: id, ReasonCode: rc, Properties: pr}
	case TypeSubscribe:
		s := &Subscribe{PacketID: g.packetID(), Properties: props(t)}
		for n := 1 + g.r.IntN(4); n > 0; n-- {
			sub := Subscription{Filter: g.filter(), QoS: g.qos()}
			if v5 {
				sub.NoLocal = g.chance(2) && !IsShared(sub.Filter)
				sub.RetainAsPublished = g.chance(2)
				sub.RetainHandling = byte(g.r.IntN(3))
			}
			s.Subscriptions = append(s.Subscriptions, sub)
		}
		return s
	case TypeSuback, TypeUnsuback:
		id, pr := g.packetID(), props(t)
		var codes []ReasonCode
		if t == TypeSuback || v5 {
			for n := 1 + g.r.IntN(4); n > 0; n-- {
				codes = append(codes, g.reason(t, v))
			}
		}
		if t == TypeSuback {
			return &Suback{PacketID: id, Properties: pr, ReasonCodes: codes}
		}
		return &Unsuback{PacketID: id, Properties: pr, ReasonCodes: codes}
	case TypeUnsubscribe:
		u := &Unsubscribe{PacketID: g.packetID(), Properties: props(t)}
		for n := 1 + g.r.IntN(4); n > 0; n-- {
			u.Filters = append(u.Filters, g.filter())
		}
		return u
	case TypePingreq:
		return &Pingreq{}
	case TypePingresp:
		return &Pingresp{}
	case TypeDisconnect:
		d := &Disconnect{}
		if v5 {
			d.ReasonCode, d.Properties = g.reason(t, v), props(t)
		}
		return d
	case TypeAuth:
		return &Auth{ReasonCode: g.reason(t, v), Properties: props(t)}
	}
	panic("gen: bad type")
}

// anyPacket returns a random packet of any type valid at v.
func (g *gen) anyPacket(v Version) Packet {
	last := TypeDisconnect
	if v == Version5 {
		last = TypeAuth
	}
	return g.packet(Type(1+g.r.IntN(int(last))), v)
}
