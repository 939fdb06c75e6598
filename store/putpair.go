package store

import "github.com/smartgo/smartgo/store/record"

// PutPair appends two records back to back under one writer lock, so that
// no other record comes between them, and returns without waiting for a
// flush. It is for a record and the record that notes it was written (a
// committed transaction message and its entry in the operation topic):
// after a crash either both are in the log, or none, or only first, and
// then first is the last record of the log (a failed append stops the
// store's writes). The store sets each message's offsets, store time and
// store host as Put does. A non-nil error with first's result set
// (res[0].Status == PutOK) means only first was stored.
func (s *Store) PutPair(first, second *record.Message) (res [2]PutResult, err error) {
	start := monoNow()
	if st, err := s.checkWritableAt(start); err != nil {
		s.stats.putErrors.Add(1)
		return [2]PutResult{{Status: st}, {Status: st}}, err
	}
	msgs := [2]*record.Message{first, second}
	var sizes [2]int
	for i, m := range msgs {
		m.StoreHost = s.opts.StoreHost
		m.Properties = record.StripCRCProperty(m.Properties)
		sizes[i] = record.SealedSize(m)
		if err := s.opts.sizeError(-1, len(m.Body), sizes[i]); err != nil {
			s.stats.putErrors.Add(1)
			return [2]PutResult{{Status: PutMessageIllegal}, {Status: PutMessageIllegal}}, err
		}
	}
	s.putMu.Lock()
	if st, err := s.stillWritable(); err != nil {
		s.putMu.Unlock()
		s.stats.putErrors.Add(1)
		return [2]PutResult{{Status: st}, {Status: st}}, err
	}
	now := s.opts.Now().UnixMilli()
	s.putLockedAt.Store(now)
	viaPend := s.cl.viaPendLocked(false, now)
	for i, m := range msgs {
		key := cqKey{m.Topic, m.QueueID}
		excluded := isTxExcluded(m.SysFlag)
		qoff := int64(0)
		if !excluded {
			qoff = s.queueOffsetLocked(key)
		}
		m.QueueOffset, m.StoreTimestamp = qoff, now
		phy, err := s.cl.appendLocked(m, sizes[i], viaPend)
		if err != nil {
			if i == 1 {
				_ = s.afterAppendLocked(false, viaPend) // first is stored: write it out
			}
			s.unlockPut()
			r, err := s.putFailed(err)
			res[i] = r
			return res, err
		}
		if !excluded {
			s.setQueueOffsetLocked(key, qoff+1)
		}
		m.PhysicalOffset = phy
		res[i] = PutResult{Status: PutOK, PhysicalOffset: phy, QueueOffset: qoff, WroteBytes: sizes[i],
			StoreTimestamp: now, MsgCount: 1, StoreHost: s.opts.StoreHost}
	}
	if err := s.afterAppendLocked(false, viaPend); err != nil {
		s.unlockPut()
		r, err := s.putFailed(err)
		return [2]PutResult{r, r}, err
	}
	s.unlockPut()
	d := monoNow() - start
	res[0].Latency, res[1].Latency = d, d
	s.stats.recordPut(2, sizes[0]+sizes[1], d)
	return res, nil
}
