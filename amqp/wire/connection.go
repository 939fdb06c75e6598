package wire

// ConnectionStart is connection.start (10, 10).
type ConnectionStart struct {
	VersionMajor     uint8
	VersionMinor     uint8
	ServerProperties Table
	Mechanisms       string
	Locales          string
}

func (*ConnectionStart) ClassID() uint16  { return 10 }
func (*ConnectionStart) MethodID() uint16 { return 10 }
func (*ConnectionStart) HasContent() bool { return false }

func (m *ConnectionStart) AppendArgs(dst []byte) []byte {
	dst = append(dst, m.VersionMajor)
	dst = append(dst, m.VersionMinor)
	dst = appendArgTable(dst, m.ServerProperties)
	dst = appendLongstr(dst, m.Mechanisms)
	dst = appendLongstr(dst, m.Locales)
	return dst
}

func (m *ConnectionStart) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.VersionMajor = d.octet()
	m.VersionMinor = d.octet()
	m.ServerProperties = d.table()
	m.Mechanisms = d.longstr()
	m.Locales = d.longstr()
	return d.finish()
}

// ConnectionStartOk is connection.start-ok (10, 11).
type ConnectionStartOk struct {
	ClientProperties Table
	Mechanism        string
	Response         string
	Locale           string
}

func (*ConnectionStartOk) ClassID() uint16  { return 10 }
func (*ConnectionStartOk) MethodID() uint16 { return 11 }
func (*ConnectionStartOk) HasContent() bool { return false }

func (m *ConnectionStartOk) AppendArgs(dst []byte) []byte {
	dst = appendArgTable(dst, m.ClientProperties)
	dst = appendShortstr(dst, m.Mechanism)
	dst = appendLongstr(dst, m.Response)
	dst = appendShortstr(dst, m.Locale)
	return dst
}

func (m *ConnectionStartOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ClientProperties = d.table()
	m.Mechanism = d.shortstr()
	m.Response = d.longstr()
	m.Locale = d.shortstr()
	return d.finish()
}

// ConnectionSecure is connection.secure (10, 20).
type ConnectionSecure struct {
	Challenge string
}

func (*ConnectionSecure) ClassID() uint16  { return 10 }
func (*ConnectionSecure) MethodID() uint16 { return 20 }
func (*ConnectionSecure) HasContent() bool { return false }

func (m *ConnectionSecure) AppendArgs(dst []byte) []byte {
	dst = appendLongstr(dst, m.Challenge)
	return dst
}

func (m *ConnectionSecure) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.Challenge = d.longstr()
	return d.finish()
}

// ConnectionSecureOk is connection.secure-ok (10, 21).
type ConnectionSecureOk struct {
	Response string
}

func (*ConnectionSecureOk) ClassID() uint16  { return 10 }
func (*ConnectionSecureOk) MethodID() uint16 { return 21 }
func (*ConnectionSecureOk) HasContent() bool { return false }

func (m *ConnectionSecureOk) AppendArgs(dst []byte) []byte {
	dst = appendLongstr(dst, m.Response)
	return dst
}

func (m *ConnectionSecureOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.Response = d.longstr()
	return d.finish()
}

// ConnectionTune is connection.tune (10, 30).
type ConnectionTune struct {
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  uint16
}

func (*ConnectionTune) ClassID() uint16  { return 10 }
func (*ConnectionTune) MethodID() uint16 { return 30 }
func (*ConnectionTune) HasContent() bool { return false }

func (m *ConnectionTune) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, m.ChannelMax)
	dst = appendLong(dst, m.FrameMax)
	dst = appendShort(dst, m.Heartbeat)
	return dst
}

func (m *ConnectionTune) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ChannelMax = d.short()
	m.FrameMax = d.long()
	m.Heartbeat = d.short()
	return d.finish()
}

// ConnectionTuneOk is connection.tune-ok (10, 31), with the fields of ConnectionTune.
type ConnectionTuneOk ConnectionTune

func (*ConnectionTuneOk) ClassID() uint16  { return 10 }
func (*ConnectionTuneOk) MethodID() uint16 { return 31 }
func (*ConnectionTuneOk) HasContent() bool { return false }

func (m *ConnectionTuneOk) AppendArgs(dst []byte) []byte { return (*ConnectionTune)(m).AppendArgs(dst) }
func (m *ConnectionTuneOk) decodeArgs(b []byte) error    { return (*ConnectionTune)(m).decodeArgs(b) }

// ConnectionOpen is connection.open (10, 40).
type ConnectionOpen struct {
	VirtualHost string
}

func (*ConnectionOpen) ClassID() uint16  { return 10 }
func (*ConnectionOpen) MethodID() uint16 { return 40 }
func (*ConnectionOpen) HasContent() bool { return false }

func (m *ConnectionOpen) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, m.VirtualHost)
	dst = appendShortstr(dst, "")
	dst = appendBits(dst, false)
	return dst
}

func (m *ConnectionOpen) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.VirtualHost = d.shortstr()
	d.shortstr()
	d.octet()
	return d.finish()
}

// ConnectionOpenOk is connection.open-ok (10, 41).
type ConnectionOpenOk struct{}

func (*ConnectionOpenOk) ClassID() uint16  { return 10 }
func (*ConnectionOpenOk) MethodID() uint16 { return 41 }
func (*ConnectionOpenOk) HasContent() bool { return false }

func (*ConnectionOpenOk) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, "")
	return dst
}

func (*ConnectionOpenOk) decodeArgs(b []byte) error {
	d := decoder{b: b}
	d.shortstr()
	return d.finish()
}

// ConnectionClose is connection.close (10, 50).
type ConnectionClose struct {
	ReplyCode       uint16
	ReplyText       string
	FailingClassID  uint16
	FailingMethodID uint16
}

func (*ConnectionClose) ClassID() uint16  { return 10 }
func (*ConnectionClose) MethodID() uint16 { return 50 }
func (*ConnectionClose) HasContent() bool { return false }

func (m *ConnectionClose) AppendArgs(dst []byte) []byte {
	dst = appendShort(dst, m.ReplyCode)
	dst = appendShortstr(dst, m.ReplyText)
	dst = appendShort(dst, m.FailingClassID)
	dst = appendShort(dst, m.FailingMethodID)
	return dst
}

func (m *ConnectionClose) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.ReplyCode = d.short()
	m.ReplyText = d.shortstr()
	m.FailingClassID = d.short()
	m.FailingMethodID = d.short()
	return d.finish()
}

// ConnectionCloseOk is connection.close-ok (10, 51).
type ConnectionCloseOk struct{ noArgs }

func (*ConnectionCloseOk) ClassID() uint16  { return 10 }
func (*ConnectionCloseOk) MethodID() uint16 { return 51 }
func (*ConnectionCloseOk) HasContent() bool { return false }

// ConnectionBlocked is connection.blocked (10, 60).
type ConnectionBlocked struct {
	Reason string
}

func (*ConnectionBlocked) ClassID() uint16  { return 10 }
func (*ConnectionBlocked) MethodID() uint16 { return 60 }
func (*ConnectionBlocked) HasContent() bool { return false }

func (m *ConnectionBlocked) AppendArgs(dst []byte) []byte {
	dst = appendShortstr(dst, m.Reason)
	return dst
}

func (m *ConnectionBlocked) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.Reason = d.shortstr()
	return d.finish()
}

// ConnectionUnblocked is connection.unblocked (10, 61).
type ConnectionUnblocked struct{ noArgs }

func (*ConnectionUnblocked) ClassID() uint16  { return 10 }
func (*ConnectionUnblocked) MethodID() uint16 { return 61 }
func (*ConnectionUnblocked) HasContent() bool { return false }

// ConnectionUpdateSecret is connection.update-secret (10, 70).
type ConnectionUpdateSecret struct {
	NewSecret string
	Reason    string
}

func (*ConnectionUpdateSecret) ClassID() uint16  { return 10 }
func (*ConnectionUpdateSecret) MethodID() uint16 { return 70 }
func (*ConnectionUpdateSecret) HasContent() bool { return false }

func (m *ConnectionUpdateSecret) AppendArgs(dst []byte) []byte {
	dst = appendLongstr(dst, m.NewSecret)
	dst = appendShortstr(dst, m.Reason)
	return dst
}

func (m *ConnectionUpdateSecret) decodeArgs(b []byte) error {
	d := decoder{b: b}
	m.NewSecret = d.longstr()
	m.Reason = d.shortstr()
	return d.finish()
}

// ConnectionUpdateSecretOk is connection.update-secret-ok (10, 71).
type ConnectionUpdateSecretOk struct{ noArgs }

func (*ConnectionUpdateSecretOk) ClassID() uint16  { return 10 }
func (*ConnectionUpdateSecretOk) MethodID() uint16 { return 71 }
func (*ConnectionUpdateSecretOk) HasContent() bool { return false }
