package store

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/smartgo/smartgo/store/record"
)

// Batch puts: the records of a SEND_BATCH body, appended under one writer
// lock so that they get consecutive queue offsets. Single puts are in
// store.go.

// PutBatch appends one record per item of a SEND_BATCH body, all with tmpl's
// topic, queue, hosts, timestamps and sys flag, under one writer lock so
// they get consecutive queue offsets. Each item's properties are followed
// by tmpl.Properties (the batch-level properties), separated by 0x02. Either
// every record is stored or none (validation happens first). In FlushSync
// mode it waits for the group commit unless tmpl's WAIT property is "false".
func (s *Store) PutBatch(ctx context.Context, tmpl *record.Message, items []record.BatchItem) (BatchResult, error) {
	return s.PutBatchWait(ctx, tmpl, items, waitStore(tmpl.Properties))
}

// PutBatchWait is PutBatch with the wait for the group commit chosen by the
// caller (see PutWait).
func (s *Store) PutBatchWait(ctx context.Context, tmpl *record.Message, items []record.BatchItem, wait bool) (BatchResult, error) {
	start := monoNow()
	res, ap, err := s.putBatch(tmpl, items, wait)
	if err != nil {
		return res, err
	}
	if ap.wait {
		if res.Status = s.waitDurable(ctx, ap); res.Status != PutOK && res.Status != PutFlushDiskTimeout {
			return BatchResult{PutResult: PutResult{Status: res.Status}}, s.notStored()
		}
	}
	res.Latency = monoNow() - start
	s.stats.recordPut(len(items), res.WroteBytes, res.Latency)
	return res, nil
}

// PutBatchAsync is PutBatchWait without a waiting goroutine, as PutAsync
// is PutWait.
func (s *Store) PutBatchAsync(tmpl *record.Message, items []record.BatchItem, wait bool, done func(BatchResult, error)) (res BatchResult, pending bool, err error) {
	start := monoNow()
	res, ap, err := s.putBatch(tmpl, items, wait)
	if err != nil || !ap.wait {
		if err == nil {
			res.Latency = monoNow() - start
			s.stats.recordPut(len(items), res.WroteBytes, res.Latency)
		}
		return res, false, err
	}
	n := len(items)
	finish := func(st PutStatus) (BatchResult, error) {
		if st != PutOK && st != PutFlushDiskTimeout {
			return BatchResult{PutResult: PutResult{Status: st}}, s.notStored()
		}
		r := res
		r.Status = st
		r.Latency = monoNow() - start
		s.stats.recordPut(n, r.WroteBytes, r.Latency)
		return r, nil
	}
	st, pending := s.whenDurable(ap, func(st PutStatus) { done(finish(st)) })
	if pending {
		return res, true, nil
	}
	res, err = finish(st)
	return res, false, err
}

// putBatch appends the records of a batch (the part of PutBatchWait under
// the writer lock).
func (s *Store) putBatch(tmpl *record.Message, items []record.BatchItem, wait bool) (BatchResult, appended, error) {
	if st, err := s.checkWritable(); err != nil {
		return BatchResult{PutResult: PutResult{Status: st}}, appended{}, err
	}
	if len(items) == 0 {
		return BatchResult{PutResult: PutResult{Status: PutMessageIllegal}}, appended{}, fmt.Errorf("%w: empty batch", ErrIllegalMessage)
	}
	// Records differ only in flag, body and properties: their sizes follow
	// from the lengths, and one Message is reused for all of them.
	base := record.Size(&record.Message{Topic: tmpl.Topic, BornHost: tmpl.BornHost, StoreHost: s.opts.StoreHost})
	tmplProps := record.StripCRCProperty(tmpl.Properties)
	total := 0
	for i, it := range items {
		np := batchPropsLen(it.Properties, tmplProps)
		size := base + len(it.Body) + np
		if err := s.opts.sizeError(i, len(it.Body), size); err != nil {
			return BatchResult{PutResult: PutResult{Status: PutMessageIllegal}}, appended{}, err
		}
		if len(tmpl.Topic) > record.MaxTopicLen || np > record.MaxPropertiesLen {
			return BatchResult{PutResult: PutResult{Status: PutMessageIllegal}}, appended{},
				fmt.Errorf("%w: batch item %d: topic or properties too long", ErrIllegalMessage, i)
		}
		total += size
	}
	excluded := isTxExcluded(tmpl.SysFlag)
	res := BatchResult{PhysicalOffsets: make([]int64, len(items))}
	s.putMu.Lock()
	if st, err := s.stillWritable(); err != nil {
		s.putMu.Unlock()
		return BatchResult{PutResult: PutResult{Status: st}}, appended{}, err
	}
	key := cqKey{tmpl.Topic, tmpl.QueueID}
	qoff := int64(0)
	if !excluded {
		qoff = s.queueOffsetLocked(key)
	}
	now := s.opts.Now().UnixMilli()
	s.putLockedAt.Store(now)
	viaPend := s.cl.viaPendLocked(true, now)
	var end int64
	m := *tmpl
	m.Known = record.KnownProperties{} // the items' properties are others
	m.StoreTimestamp = now
	m.StoreHost = s.opts.StoreHost
	for i, it := range items {
		// batchProps is protected by putMu; m.Properties views it only
		// until the record is encoded.
		s.batchProps = appendBatchProps(s.batchProps[:0], it.Properties, tmplProps)
		m.Flag = it.Flag
		m.Body = it.Body
		m.Properties = unsafe.String(unsafe.SliceData(s.batchProps), len(s.batchProps))
		m.QueueOffset = qoff
		if !excluded {
			m.QueueOffset = qoff + int64(i)
		}
		size := base + len(it.Body) + sealedPropsLen(s.batchProps)
		phy, err := s.cl.appendLocked(&m, size, viaPend)
		if err != nil {
			if i > 0 && !excluded {
				s.setQueueOffsetLocked(key, qoff+int64(i))
			}
			if i > 0 && viaPend && !s.cl.pwrite {
				_ = s.cl.drainLocked() // what was appended is readable
			}
			s.unlockPut()
			if i > 0 && !isNoSpace(err) && !errors.Is(err, errNotWritten) {
				// Part of the batch is in the log: that is a write failure.
				s.setWriteErr(err)
				return BatchResult{PutResult: PutResult{Status: PutServiceNotAvailable}}, appended{}, s.Err()
			}
			// Nothing more could be written (the disk filled between the
			// check and this record): the batch is refused; its first i
			// records stay stored, as a retry of it may store them again.
			r, e := s.putFailed(err)
			return BatchResult{PutResult: r}, appended{}, e
		}
		res.PhysicalOffsets[i] = phy
		end = phy + int64(size)
	}
	if cap(s.batchProps) > maxBatchPropsKeep {
		s.batchProps = nil
	}
	if !excluded {
		s.setQueueOffsetLocked(key, qoff+int64(len(items)))
	}
	gen := s.cl.discards.gen.Load()
	wait = wait && s.opts.FlushMode == FlushSync
	if err := s.afterAppendLocked(wait, viaPend); err != nil {
		s.unlockPut()
		r, e := s.putFailed(err)
		return BatchResult{PutResult: r}, appended{}, e
	}
	s.unlockPut()
	res.PutResult = PutResult{Status: PutOK, PhysicalOffset: res.PhysicalOffsets[0], QueueOffset: qoff,
		WroteBytes: total, StoreTimestamp: now, MsgCount: len(items), StoreHost: s.opts.StoreHost}
	res.End = end
	return res, appended{start: res.PhysicalOffsets[0], end: end, gen: gen, wait: wait}, nil
}

// maxBatchPropsKeep bounds the properties scratch a store keeps between
// batches.
const maxBatchPropsKeep = 64 << 10

// batchPropsLen is the PROPERTIESLEN of a batch record, sealed:
// len(appendBatchProps(nil, item, tmpl)) and the CRC trailer.
func batchPropsLen(item []byte, tmpl string) int {
	item = stripCRCBytes(item)
	n := len(item) + len(tmpl)
	if len(item) > 0 && len(tmpl) > 0 && item[len(item)-1] != record.PropertySeparator {
		n++
	}
	last := byte(0)
	switch {
	case len(tmpl) > 0:
		last = tmpl[len(tmpl)-1]
	case len(item) > 0:
		last = item[len(item)-1]
	}
	return record.SealedPropertiesLen(n, last)
}

// sealedPropsLen is the PROPERTIESLEN of a record whose properties string
// before sealing is props.
func sealedPropsLen(props []byte) int {
	last := byte(0)
	if len(props) > 0 {
		last = props[len(props)-1]
	}
	return record.SealedPropertiesLen(len(props), last)
}

// stripCRCBytes is record.StripCRCProperty for a batch item's properties
// (allocating only when the item carries the CRC key).
func stripCRCBytes(props []byte) []byte {
	if !record.HasCRCProperty(unsafe.String(unsafe.SliceData(props), len(props))) {
		return props
	}
	return []byte(record.StripCRCProperty(string(props)))
}

// appendBatchProps appends a batch record's properties: the item's own
// (without a CRC property), a separator unless they end with one, then the
// template's.
func appendBatchProps(dst, item []byte, tmpl string) []byte {
	item = stripCRCBytes(item)
	dst = append(dst, item...)
	if len(item) > 0 && len(tmpl) > 0 && item[len(item)-1] != record.PropertySeparator {
		dst = append(dst, record.PropertySeparator)
	}
	return append(dst, tmpl...)
}
