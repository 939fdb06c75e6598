package wire

// ChannelOpen is channel.open (20, 10).
type ChannelOpen struct{}

func (*ChannelOpen) ClassID() uint16  { return 20 }
func (*ChannelOpen) MethodID() uint16 { return 10 }
func (*ChannelOpen) HasContent() bool { return false }

func (*ChannelOpen) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, "")
	return dst
}

func (*ChannelOpen) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.shortstr()
	return d.finish()
}

// ChannelOpenOk is channel.open-ok (20, 11).
type ChannelOpenOk struct{}

func (*ChannelOpenOk) ClassID() uint16  { return 20 }
func (*ChannelOpenOk) MethodID() uint16 { return 11 }
func (*ChannelOpenOk) HasContent() bool { return false }

func (*ChannelOpenOk) AppendArgs(dst []byte) []byte {
	dst = appendLongstr(dst, "")
	return dst
}

func (*ChannelOpenOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.longstr()
	return d.finish()
}

// ChannelFlow is channel.flow (20, 20).
type ChannelFlow struct {
	Active bool
}

func (*ChannelFlow) ClassID() uint16  { return 20 }
func (*ChannelFlow) MethodID() uint16 { return 20 }
func (*ChannelFlow) HasContent() bool { return false }

func (m *ChannelFlow) AppendArgs(dst []byte) []byte {
	dst = appendBits(dst, m.Active)
	return dst
}

func (m *ChannelFlow) decodeArgs(b []byte) error {
	d := decoder{b: b}
	bits := d.octet()
	m.Active = bits&1 != 0
	return d.finish()
}

// ChannelFlowOk is channel.flow-ok (20, 21), with the fields of ChannelFlow.
type ChannelFlowOk ChannelFlow

func (*ChannelFlowOk) ClassID() uint16  { return 20 }
func (*ChannelFlowOk) MethodID() uint16 { return 21 }
func (*ChannelFlowOk) HasContent() bool { return false }

func (m *ChannelFlowOk) AppendArgs(dst []byte) []byte { return (*ChannelFlow)(m).AppendArgs(dst) }
func (m *ChannelFlowOk) decodeArgs(b []byte) error    { return (*ChannelFlow)(m).decodeArgs(b) }

// ChannelClose is channel.close (20, 40), with the fields of ConnectionClose.
type ChannelClose ConnectionClose

func (*ChannelClose) ClassID() uint16  { return 20 }
func (*ChannelClose) MethodID() uint16 { return 40 }
func (*ChannelClose) HasContent() bool { return false }

func (m *ChannelClose) AppendArgs(dst []byte) []byte { return (*ConnectionClose)(m).AppendArgs(dst) }
func (m *ChannelClose) decodeArgs(b []byte) error    { return (*ConnectionClose)(m).decodeArgs(b) }

// ChannelCloseOk is channel.close-ok (20, 41).
type ChannelCloseOk struct{ noArgs }

func (*ChannelCloseOk) ClassID() uint16  { return 20 }
func (*ChannelCloseOk) MethodID() uint16 { return 41 }
func (*ChannelCloseOk) HasContent() bool { return false }
