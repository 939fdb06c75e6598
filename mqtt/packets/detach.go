package packets

import "unsafe"

// detacher moves every string and byte slice of a packet into two fresh
// arenas in two passes: the first (sizing) sums the lengths, the second
// copies. Strings go into one arena that is never exposed as bytes, so they
// stay immutable; byte slices go into the other. Keeping them apart means a
// small string kept by the caller (a topic in a topic alias table) does not
// pin a large payload.
type detacher struct {
	sizing     bool
	strN, binN int
	strs, bins []byte
}

func (d *detacher) str(s *string) {
	if d.sizing {
		d.strN += len(*s)
		return
	}
	if len(*s) == 0 {
		*s = ""
		return
	}
	off := len(d.strs)
	d.strs = append(d.strs, *s...)
	*s = unsafe.String(&d.strs[off], len(*s))
}

func (d *detacher) bin(b *[]byte) {
	if d.sizing {
		d.binN += len(*b)
		return
	}
	if len(*b) == 0 {
		*b = nil
		return
	}
	off := len(d.bins)
	d.bins = append(d.bins, *b...)
	*b = d.bins[off:len(d.bins):len(d.bins)]
}

// Detach copies every string and byte slice of p into memory owned by p, so
// that p stays valid after the buffer it was decoded from is reused. It
// makes at most two allocations (one for all strings, one for all byte
// slices). Decode calls it unless Options.Alias is set; a server using Alias
// calls it on the packets it keeps (queued, retained, inflight).
func Detach(p Packet) {
	d := detacher{sizing: true}
	for pass := 0; pass < 2; pass++ {
		// A type switch rather than an interface call keeps d on the stack.
		switch p := p.(type) {
		case *Connect:
			p.visit(&d)
		case *Connack:
			p.Properties.visit(&d)
		case *Publish:
			p.visit(&d)
		case *Puback:
			p.Properties.visit(&d)
		case *Pubrec:
			p.Properties.visit(&d)
		case *Pubrel:
			p.Properties.visit(&d)
		case *Pubcomp:
			p.Properties.visit(&d)
		case *Subscribe:
			p.visit(&d)
		case *Suback:
			p.Properties.visit(&d)
		case *Unsubscribe:
			p.visit(&d)
		case *Unsuback:
			p.Properties.visit(&d)
		case *Disconnect:
			p.Properties.visit(&d)
		case *Auth:
			p.Properties.visit(&d)
		}
		if d.sizing {
			d.sizing = false
			if d.strN > 0 {
				d.strs = make([]byte, 0, d.strN)
			}
			if d.binN > 0 {
				d.bins = make([]byte, 0, d.binN)
			}
		}
	}
}

func (p *Connect) visit(d *detacher) {
	d.str(&p.ClientID)
	d.str(&p.WillTopic)
	d.str(&p.Username)
	d.bin(&p.WillPayload)
	d.bin(&p.Password)
	p.Properties.visit(d)
	p.WillProperties.visit(d)
}

func (p *Publish) visit(d *detacher) {
	d.str(&p.Topic)
	d.bin(&p.Payload)
	p.Properties.visit(d)
}

func (p *Subscribe) visit(d *detacher) {
	for i := range p.Subscriptions {
		d.str(&p.Subscriptions[i].Filter)
	}
	p.Properties.visit(d)
}

func (p *Unsubscribe) visit(d *detacher) {
	for i := range p.Filters {
		d.str(&p.Filters[i])
	}
	p.Properties.visit(d)
}
