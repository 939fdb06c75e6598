package wire

// BasicQos is basic.qos (60, 10).
type BasicQos struct {
	PrefetchSize  uint32
	PrefetchCount uint16
	Global        bool
}

func (*BasicQos) ClassID() uint16  { return 60 }
func (*BasicQos) MethodID() uint16 { return 10 }
func (*BasicQos) HasContent() bool { return false }

func (m *BasicQos) AppendArgs(dst []byte) []byte {
	dst = appendLong(dst, m.PrefetchSize)
	dst = appendShort(dst, m.PrefetchCount)
	dst = appendBits(dst, m.Global)
	return dst
}

func (m *BasicQos) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.PrefetchSize = d.long()
	m.PrefetchCount = d.short()
	bits := d.octet()
	m.Global = bits&1 != 0
	return d.finish()
}

// BasicQosOk is basic.qos-ok (60, 11).
type BasicQosOk struct{ noArgs }

func (*BasicQosOk) ClassID() uint16  { return 60 }
func (*BasicQosOk) MethodID() uint16 { return 11 }
func (*BasicQosOk) HasContent() bool { return false }

// BasicConsume is basic.consume (60, 20).
type BasicConsume struct {
	Queue       string
	ConsumerTag string
	NoLocal     bool
	NoAck       bool
	Exclusive   bool
	NoWait      bool
	Arguments   Table
}

func (*BasicConsume) ClassID() uint16  { return 60 }
func (*BasicConsume) MethodID() uint16 { return 20 }
func (*BasicConsume) HasContent() bool { return false }

func (m *BasicConsume) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendShortstr(dst, m.ConsumerTag)
	dst = appendBits(dst, m.NoLocal, m.NoAck, m.Exclusive, m.NoWait)
	dst = appendArgTable(dst, m.Arguments)
	return dst
}

func (m *BasicConsume) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	m.ConsumerTag = d.shortstr()
	bits := d.octet()
	m.NoLocal = bits&1 != 0
	m.NoAck = bits&2 != 0
	m.Exclusive = bits&4 != 0
	m.NoWait = bits&8 != 0
	m.Arguments = d.table()
	return d.finish()
}

// BasicConsumeOk is basic.consume-ok (60, 21).
type BasicConsumeOk struct {
	ConsumerTag string
}

func (*BasicConsumeOk) ClassID() uint16  { return 60 }
func (*BasicConsumeOk) MethodID() uint16 { return 21 }
func (*BasicConsumeOk) HasContent() bool { return false }

func (m *BasicConsumeOk) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, m.ConsumerTag)
	return dst
}

func (m *BasicConsumeOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ConsumerTag = d.shortstr()
	return d.finish()
}

// BasicCancel is basic.cancel (60, 30).
type BasicCancel struct {
	ConsumerTag string
	NoWait      bool
}

func (*BasicCancel) ClassID() uint16  { return 60 }
func (*BasicCancel) MethodID() uint16 { return 30 }
func (*BasicCancel) HasContent() bool { return false }

func (m *BasicCancel) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, m.ConsumerTag)
	dst = appendBits(dst, m.NoWait)
	return dst
}

func (m *BasicCancel) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ConsumerTag = d.shortstr()
	bits := d.octet()
	m.NoWait = bits&1 != 0
	return d.finish()
}

// BasicCancelOk is basic.cancel-ok (60, 31), with the fields of BasicConsumeOk.
type BasicCancelOk BasicConsumeOk

func (*BasicCancelOk) ClassID() uint16  { return 60 }
func (*BasicCancelOk) MethodID() uint16 { return 31 }
func (*BasicCancelOk) HasContent() bool { return false }

func (m *BasicCancelOk) AppendArgs(dst []byte) []byte { return (*BasicConsumeOk)(m).AppendArgs(dst) }
func (m *BasicCancelOk) decodeArgs(b []byte) error    { return (*BasicConsumeOk)(m).decodeArgs(b) }

// BasicPublish is basic.publish (60, 40).
type BasicPublish struct {
	Exchange   string
	RoutingKey string
	Mandatory  bool
	Immediate  bool
}

func (*BasicPublish) ClassID() uint16  { return 60 }
func (*BasicPublish) MethodID() uint16 { return 40 }
func (*BasicPublish) HasContent() bool { return true }

func (m *BasicPublish) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.RoutingKey)
	dst = appendBits(dst, m.Mandatory, m.Immediate)
	return dst
}

func (m *BasicPublish) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Exchange = d.shortstr()
	m.RoutingKey = d.shortstr()
	bits := d.octet()
	m.Mandatory = bits&1 != 0
	m.Immediate = bits&2 != 0
	return d.finish()
}

// BasicReturn is basic.return (60, 50).
type BasicReturn struct {
	ReplyCode  uint16
	ReplyText  string
	Exchange   string
	RoutingKey string
}

func (*BasicReturn) ClassID() uint16  { return 60 }
func (*BasicReturn) MethodID() uint16 { return 50 }
func (*BasicReturn) HasContent() bool { return true }

func (m *BasicReturn) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, m.ReplyCode)
	dst = appendShortstr(dst, m.ReplyText)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.RoutingKey)
	return dst
}

func (m *BasicReturn) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ReplyCode = d.short()
	m.ReplyText = d.shortstr()
	m.Exchange = d.shortstr()
	m.RoutingKey = d.shortstr()
	return d.finish()
}

// BasicDeliver is basic.deliver (60, 60).
type BasicDeliver struct {
	ConsumerTag string
	DeliveryTag uint64
	Redelivered bool
	Exchange    string
	RoutingKey  string
}

func (*BasicDeliver) ClassID() uint16  { return 60 }
func (*BasicDeliver) MethodID() uint16 { return 60 }
func (*BasicDeliver) HasContent() bool { return true }

func (m *BasicDeliver) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, m.ConsumerTag)
	dst = appendLonglong(dst, m.DeliveryTag)
	dst = appendBits(dst, m.Redelivered)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.RoutingKey)
	return dst
}

func (m *BasicDeliver) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ConsumerTag = d.shortstr()
	m.DeliveryTag = d.longlong()
	bits := d.octet()
	m.Redelivered = bits&1 != 0
	m.Exchange = d.shortstr()
	m.RoutingKey = d.shortstr()
	return d.finish()
}

// BasicGet is basic.get (60, 70).
type BasicGet struct {
	Queue string
	NoAck bool
}

func (*BasicGet) ClassID() uint16  { return 60 }
func (*BasicGet) MethodID() uint16 { return 70 }
func (*BasicGet) HasContent() bool { return false }

func (m *BasicGet) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendBits(dst, m.NoAck)
	return dst
}

func (m *BasicGet) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	bits := d.octet()
	m.NoAck = bits&1 != 0
	return d.finish()
}

// BasicGetOk is basic.get-ok (60, 71).
type BasicGetOk struct {
	DeliveryTag  uint64
	Redelivered  bool
	Exchange     string
	RoutingKey   string
	MessageCount uint32
}

func (*BasicGetOk) ClassID() uint16  { return 60 }
func (*BasicGetOk) MethodID() uint16 { return 71 }
func (*BasicGetOk) HasContent() bool { return true }

func (m *BasicGetOk) AppendArgs(dst []byte) []byte {
	dst = appendLonglong(dst, m.DeliveryTag)
	dst = appendBits(dst, m.Redelivered)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.RoutingKey)
	dst = appendLong(dst, m.MessageCount)
	return dst
}

func (m *BasicGetOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.DeliveryTag = d.longlong()
	bits := d.octet()
	m.Redelivered = bits&1 != 0
	m.Exchange = d.shortstr()
	m.RoutingKey = d.shortstr()
	m.MessageCount = d.long()
	return d.finish()
}

// BasicGetEmpty is basic.get-empty (60, 72).
type BasicGetEmpty struct{}

func (*BasicGetEmpty) ClassID() uint16  { return 60 }
func (*BasicGetEmpty) MethodID() uint16 { return 72 }
func (*BasicGetEmpty) HasContent() bool { return false }

func (*BasicGetEmpty) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, "")
	return dst
}

func (*BasicGetEmpty) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.shortstr()
	return d.finish()
}

// BasicAck is basic.ack (60, 80).
type BasicAck struct {
	DeliveryTag uint64
	Multiple    bool
}

func (*BasicAck) ClassID() uint16  { return 60 }
func (*BasicAck) MethodID() uint16 { return 80 }
func (*BasicAck) HasContent() bool { return false }

func (m *BasicAck) AppendArgs(dst []byte) []byte {
	dst = appendLonglong(dst, m.DeliveryTag)
	dst = appendBits(dst, m.Multiple)
	return dst
}

func (m *BasicAck) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.DeliveryTag = d.longlong()
	bits := d.octet()
	m.Multiple = bits&1 != 0
	return d.finish()
}

// BasicReject is basic.reject (60, 90).
type BasicReject struct {
	DeliveryTag uint64
	Requeue     bool
}

func (*BasicReject) ClassID() uint16  { return 60 }
func (*BasicReject) MethodID() uint16 { return 90 }
func (*BasicReject) HasContent() bool { return false }

func (m *BasicReject) AppendArgs(dst []byte) []byte {
	dst = appendLonglong(dst, m.DeliveryTag)
	dst = appendBits(dst, m.Requeue)
	return dst
}

func (m *BasicReject) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.DeliveryTag = d.longlong()
	bits := d.octet()
	m.Requeue = bits&1 != 0
	return d.finish()
}

// BasicRecoverAsync is basic.recover-async (60, 100).
type BasicRecoverAsync struct {
	Requeue bool
}

func (*BasicRecoverAsync) ClassID() uint16  { return 60 }
func (*BasicRecoverAsync) MethodID() uint16 { return 100 }
func (*BasicRecoverAsync) HasContent() bool { return false }

func (m *BasicRecoverAsync) AppendArgs(dst []byte) []byte {
	dst = appendBits(dst, m.Requeue)
	return dst
}

func (m *BasicRecoverAsync) decodeArgs(b []byte) error {
	d := decoder{b: b}
	bits := d.octet()
	m.Requeue = bits&1 != 0
	return d.finish()
}

// BasicRecover is basic.recover (60, 110), with the fields of BasicRecoverAsync.
type BasicRecover BasicRecoverAsync

func (*BasicRecover) ClassID() uint16  { return 60 }
func (*BasicRecover) MethodID() uint16 { return 110 }
func (*BasicRecover) HasContent() bool { return false }

func (m *BasicRecover) AppendArgs(dst []byte) []byte { return (*BasicRecoverAsync)(m).AppendArgs(dst) }
func (m *BasicRecover) decodeArgs(b []byte) error    { return (*BasicRecoverAsync)(m).decodeArgs(b) }

// BasicRecoverOk is basic.recover-ok (60, 111).
type BasicRecoverOk struct{ noArgs }

func (*BasicRecoverOk) ClassID() uint16  { return 60 }
func (*BasicRecoverOk) MethodID() uint16 { return 111 }
func (*BasicRecoverOk) HasContent() bool { return false }

// BasicNack is basic.nack (60, 120).
type BasicNack struct {
	DeliveryTag uint64
	Multiple    bool
	Requeue     bool
}

func (*BasicNack) ClassID() uint16  { return 60 }
func (*BasicNack) MethodID() uint16 { return 120 }
func (*BasicNack) HasContent() bool { return false }

func (m *BasicNack) AppendArgs(dst []byte) []byte {
	dst = appendLonglong(dst, m.DeliveryTag)
	dst = appendBits(dst, m.Multiple, m.Requeue)
	return dst
}

func (m *BasicNack) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.DeliveryTag = d.longlong()
	bits := d.octet()
	m.Multiple = bits&1 != 0
	m.Requeue = bits&2 != 0
	return d.finish()
}
