package wire

// QueueDeclare is queue.declare (50, 10).
type QueueDeclare struct {
	Queue      string
	Passive    bool
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	NoWait     bool
	Arguments  Table
}

func (*QueueDeclare) ClassID() uint16  { return 50 }
func (*QueueDeclare) MethodID() uint16 { return 10 }
func (*QueueDeclare) HasContent() bool { return false }

func (m *QueueDeclare) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendBits(dst, m.Passive, m.Durable, m.Exclusive, m.AutoDelete, m.NoWait)
	dst = appendArgTable(dst, m.Arguments)
	return dst
}

func (m *QueueDeclare) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	bits := d.octet()
	m.Passive = bits&1 != 0
	m.Durable = bits&2 != 0
	m.Exclusive = bits&4 != 0
	m.AutoDelete = bits&8 != 0
	m.NoWait = bits&16 != 0
	m.Arguments = d.table()
	return d.finish()
}

// QueueDeclareOk is queue.declare-ok (50, 11).
type QueueDeclareOk struct {
	Queue         string
	MessageCount  uint32
	ConsumerCount uint32
}

func (*QueueDeclareOk) ClassID() uint16  { return 50 }
func (*QueueDeclareOk) MethodID() uint16 { return 11 }
func (*QueueDeclareOk) HasContent() bool { return false }

func (m *QueueDeclareOk) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, m.Queue)
	dst = appendLong(dst, m.MessageCount)
	dst = appendLong(dst, m.ConsumerCount)
	return dst
}

func (m *QueueDeclareOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.Queue = d.shortstr()
	m.MessageCount = d.long()
	m.ConsumerCount = d.long()
	return d.finish()
}

// QueueBind is queue.bind (50, 20).
type QueueBind struct {
	Queue      string
	Exchange   string
	RoutingKey string
	NoWait     bool
	Arguments  Table
}

func (*QueueBind) ClassID() uint16  { return 50 }
func (*QueueBind) MethodID() uint16 { return 20 }
func (*QueueBind) HasContent() bool { return false }

func (m *QueueBind) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.RoutingKey)
	dst = appendBits(dst, m.NoWait)
	dst = appendArgTable(dst, m.Arguments)
	return dst
}

func (m *QueueBind) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	m.Exchange = d.shortstr()
	m.RoutingKey = d.shortstr()
	bits := d.octet()
	m.NoWait = bits&1 != 0
	m.Arguments = d.table()
	return d.finish()
}

// QueueBindOk is queue.bind-ok (50, 21).
type QueueBindOk struct{ noArgs }

func (*QueueBindOk) ClassID() uint16  { return 50 }
func (*QueueBindOk) MethodID() uint16 { return 21 }
func (*QueueBindOk) HasContent() bool { return false }

// QueuePurge is queue.purge (50, 30).
type QueuePurge struct {
	Queue  string
	NoWait bool
}

func (*QueuePurge) ClassID() uint16  { return 50 }
func (*QueuePurge) MethodID() uint16 { return 30 }
func (*QueuePurge) HasContent() bool { return false }

func (m *QueuePurge) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendBits(dst, m.NoWait)
	return dst
}

func (m *QueuePurge) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	bits := d.octet()
	m.NoWait = bits&1 != 0
	return d.finish()
}

// QueuePurgeOk is queue.purge-ok (50, 31).
type QueuePurgeOk struct {
	MessageCount uint32
}

func (*QueuePurgeOk) ClassID() uint16  { return 50 }
func (*QueuePurgeOk) MethodID() uint16 { return 31 }
func (*QueuePurgeOk) HasContent() bool { return false }

func (m *QueuePurgeOk) AppendArgs(dst []byte) []byte {
	dst = appendLong(dst, m.MessageCount)
	return dst
}

func (m *QueuePurgeOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.MessageCount = d.long()
	return d.finish()
}

// QueueDelete is queue.delete (50, 40).
type QueueDelete struct {
	Queue    string
	IfUnused bool
	IfEmpty  bool
	NoWait   bool
}

func (*QueueDelete) ClassID() uint16  { return 50 }
func (*QueueDelete) MethodID() uint16 { return 40 }
func (*QueueDelete) HasContent() bool { return false }

func (m *QueueDelete) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendBits(dst, m.IfUnused, m.IfEmpty, m.NoWait)
	return dst
}

func (m *QueueDelete) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	bits := d.octet()
	m.IfUnused = bits&1 != 0
	m.IfEmpty = bits&2 != 0
	m.NoWait = bits&4 != 0
	return d.finish()
}

// QueueDeleteOk is queue.delete-ok (50, 41), with the fields of QueuePurgeOk.
type QueueDeleteOk QueuePurgeOk

func (*QueueDeleteOk) ClassID() uint16  { return 50 }
func (*QueueDeleteOk) MethodID() uint16 { return 41 }
func (*QueueDeleteOk) HasContent() bool { return false }

func (m *QueueDeleteOk) AppendArgs(dst []byte) []byte { return (*QueuePurgeOk)(m).AppendArgs(dst) }
func (m *QueueDeleteOk) decodeArgs(b []byte) error    { return (*QueuePurgeOk)(m).decodeArgs(b) }

// QueueUnbind is queue.unbind (50, 50).
type QueueUnbind struct {
	Queue      string
	Exchange   string
	RoutingKey string
	Arguments  Table
}

func (*QueueUnbind) ClassID() uint16  { return 50 }
func (*QueueUnbind) MethodID() uint16 { return 50 }
func (*QueueUnbind) HasContent() bool { return false }

func (m *QueueUnbind) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Queue)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.RoutingKey)
	dst = appendArgTable(dst, m.Arguments)
	return dst
}

func (m *QueueUnbind) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Queue = d.shortstr()
	m.Exchange = d.shortstr()
	m.RoutingKey = d.shortstr()
	m.Arguments = d.table()
	return d.finish()
}

// QueueUnbindOk is queue.unbind-ok (50, 51).
type QueueUnbindOk struct{ noArgs }

func (*QueueUnbindOk) ClassID() uint16  { return 50 }
func (*QueueUnbindOk) MethodID() uint16 { return 51 }
func (*QueueUnbindOk) HasContent() bool { return false }
