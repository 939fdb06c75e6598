package wire

// TxSelect is tx.select (90, 10).
type TxSelect struct{ noArgs }

func (*TxSelect) ClassID() uint16  { return 90 }
func (*TxSelect) MethodID() uint16 { return 10 }
func (*TxSelect) HasContent() bool { return false }

// TxSelectOk is tx.select-ok (90, 11).
type TxSelectOk struct{ noArgs }

func (*TxSelectOk) ClassID() uint16  { return 90 }
func (*TxSelectOk) MethodID() uint16 { return 11 }
func (*TxSelectOk) HasContent() bool { return false }

// TxCommit is tx.commit (90, 20).
type TxCommit struct{ noArgs }

func (*TxCommit) ClassID() uint16  { return 90 }
func (*TxCommit) MethodID() uint16 { return 20 }
func (*TxCommit) HasContent() bool { return false }

// TxCommitOk is tx.commit-ok (90, 21).
type TxCommitOk struct{ noArgs }

func (*TxCommitOk) ClassID() uint16  { return 90 }
func (*TxCommitOk) MethodID() uint16 { return 21 }
func (*TxCommitOk) HasContent() bool { return false }

// TxRollback is tx.rollback (90, 30).
type TxRollback struct{ noArgs }

func (*TxRollback) ClassID() uint16  { return 90 }
func (*TxRollback) MethodID() uint16 { return 30 }
func (*TxRollback) HasContent() bool { return false }

// TxRollbackOk is tx.rollback-ok (90, 31).
type TxRollbackOk struct{ noArgs }

func (*TxRollbackOk) ClassID() uint16  { return 90 }
func (*TxRollbackOk) MethodID() uint16 { return 31 }
func (*TxRollbackOk) HasContent() bool { return false }

// ConfirmSelect is confirm.select (85, 10).
type ConfirmSelect struct {
	NoWait bool
}

func (*ConfirmSelect) ClassID() uint16  { return 85 }
func (*ConfirmSelect) MethodID() uint16 { return 10 }
func (*ConfirmSelect) HasContent() bool { return false }

func (m *ConfirmSelect) AppendArgs(dst []byte) []byte {
	dst = appendBits(dst, m.NoWait)
	return dst
}

func (m *ConfirmSelect) decodeArgs(b []byte) error {
	d := decoder{b: b}
	bits := d.octet()
	m.NoWait = bits&1 != 0
	return d.finish()
}

// ConfirmSelectOk is confirm.select-ok (85, 11).
type ConfirmSelectOk struct{ noArgs }

func (*ConfirmSelectOk) ClassID() uint16  { return 85 }
func (*ConfirmSelectOk) MethodID() uint16 { return 11 }
func (*ConfirmSelectOk) HasContent() bool { return false }
