package wire

// ExchangeDeclare is exchange.declare (40, 10).
type ExchangeDeclare struct {
	Exchange   string
	Type       string
	Passive    bool
	Durable    bool
	AutoDelete bool
	Internal   bool
	NoWait     bool
	Arguments  Table
}

func (*ExchangeDeclare) ClassID() uint16  { return 40 }
func (*ExchangeDeclare) MethodID() uint16 { return 10 }
func (*ExchangeDeclare) HasContent() bool { return false }

func (m *ExchangeDeclare) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendShortstr(dst, m.Type)
	dst = appendBits(dst, m.Passive, m.Durable, m.AutoDelete, m.Internal, m.NoWait)
	dst = appendArgTable(dst, m.Arguments)
	return dst
}

func (m *ExchangeDeclare) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Exchange = d.shortstr()
	m.Type = d.shortstr()
	bits := d.octet()
	m.Passive = bits&1 != 0
	m.Durable = bits&2 != 0
	m.AutoDelete = bits&4 != 0
	m.Internal = bits&8 != 0
	m.NoWait = bits&16 != 0
	m.Arguments = d.table()
	return d.finish()
}

// ExchangeDeclareOk is exchange.declare-ok (40, 11).
type ExchangeDeclareOk struct{ noArgs }

func (*ExchangeDeclareOk) ClassID() uint16  { return 40 }
func (*ExchangeDeclareOk) MethodID() uint16 { return 11 }
func (*ExchangeDeclareOk) HasContent() bool { return false }

// ExchangeDelete is exchange.delete (40, 20).
type ExchangeDelete struct {
	Exchange string
	IfUnused bool
	NoWait   bool
}

func (*ExchangeDelete) ClassID() uint16  { return 40 }
func (*ExchangeDelete) MethodID() uint16 { return 20 }
func (*ExchangeDelete) HasContent() bool { return false }

func (m *ExchangeDelete) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Exchange)
	dst = appendBits(dst, m.IfUnused, m.NoWait)
	return dst
}

func (m *ExchangeDelete) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Exchange = d.shortstr()
	bits := d.octet()
	m.IfUnused = bits&1 != 0
	m.NoWait = bits&2 != 0
	return d.finish()
}

// ExchangeDeleteOk is exchange.delete-ok (40, 21).
type ExchangeDeleteOk struct{ noArgs }

func (*ExchangeDeleteOk) ClassID() uint16  { return 40 }
func (*ExchangeDeleteOk) MethodID() uint16 { return 21 }
func (*ExchangeDeleteOk) HasContent() bool { return false }

// ExchangeBind is exchange.bind (40, 30).
type ExchangeBind struct {
	Destination string
	Source      string
	RoutingKey  string
	NoWait      bool
	Arguments   Table
}

func (*ExchangeBind) ClassID() uint16  { return 40 }
func (*ExchangeBind) MethodID() uint16 { return 30 }
func (*ExchangeBind) HasContent() bool { return false }

func (m *ExchangeBind) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, 0)
	dst = appendShortstr(dst, m.Destination)
	dst = appendShortstr(dst, m.Source)
	dst = appendShortstr(dst, m.RoutingKey)
	dst = appendBits(dst, m.NoWait)
	dst = appendArgTable(dst, m.Arguments)
	return dst
}

func (m *ExchangeBind) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.short()
	m.Destination = d.shortstr()
	m.Source = d.shortstr()
	m.RoutingKey = d.shortstr()
	bits := d.octet()
	m.NoWait = bits&1 != 0
	m.Arguments = d.table()
	return d.finish()
}

// ExchangeBindOk is exchange.bind-ok (40, 31).
type ExchangeBindOk struct{ noArgs }

func (*ExchangeBindOk) ClassID() uint16  { return 40 }
func (*ExchangeBindOk) MethodID() uint16 { return 31 }
func (*ExchangeBindOk) HasContent() bool { return false }

// ExchangeUnbind is exchange.unbind (40, 40), with the fields of ExchangeBind.
type ExchangeUnbind ExchangeBind

func (*ExchangeUnbind) ClassID() uint16  { return 40 }
func (*ExchangeUnbind) MethodID() uint16 { return 40 }
func (*ExchangeUnbind) HasContent() bool { return false }

func (m *ExchangeUnbind) AppendArgs(dst []byte) []byte { return (*ExchangeBind)(m).AppendArgs(dst) }
func (m *ExchangeUnbind) decodeArgs(b []byte) error    { return (*ExchangeBind)(m).decodeArgs(b) }

// ExchangeUnbindOk is exchange.unbind-ok (40, 51).
type ExchangeUnbindOk struct{ noArgs }

func (*ExchangeUnbindOk) ClassID() uint16  { return 40 }
func (*ExchangeUnbindOk) MethodID() uint16 { return 51 }
func (*ExchangeUnbindOk) HasContent() bool { return false }
