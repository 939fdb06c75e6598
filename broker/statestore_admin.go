package broker

import (
	"bytes"
	"slices"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// processScan serves STATESTORE_SCAN (remoting/protocol/adminext.go): the
// keys of every shard this broker hosts that start with a prefix, merged
// in byte order, for operators browsing the store.
func (s *StateStore) processScan(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var r protocol.StateStoreScanRequest
	if err := protocol.DecodeJSON(req.Body, &r); err != nil {
		return errResp(protocol.SystemError, "bad state store scan: %v", err), nil
	}
	if r.Limit == 0 {
		r.Limit = 100
	}
	if r.Limit < 0 || r.Limit > protocol.MaxStateStoreScanLimit {
		return errResp(protocol.SystemError, "state store scan: limit %d outside 1..%d", r.Limit, protocol.MaxStateStoreScanLimit), nil
	}
	if r.MaxValue <= 0 {
		r.MaxValue = 1024
	}
	if err := s.host.notOpen(); err != nil {
		return errResp(protocol.ServiceNotAvailable, "%v", err), nil
	}
	now := s.b.now()
	var page protocol.StateStoreScanPage
	for _, sh := range s.shards {
		keys, more := sh.eng.Scan(r.Prefix, r.After, r.Limit, now)
		page.More = page.More || more
		for _, k := range keys {
			page.Keys = append(page.Keys, protocol.StateStoreKey{Key: k.Key, Value: bytes.Clone(k.Value[:min(len(k.Value), r.MaxValue)]),
				Size: len(k.Value), Version: k.Version.String(), Shard: sh.id, ExpiresAt: k.ExpireAt})
		}
	}
	slices.SortFunc(page.Keys, func(x, y protocol.StateStoreKey) int { return bytes.Compare(x.Key, y.Key) })
	if len(page.Keys) > r.Limit {
		page.Keys, page.More = page.Keys[:r.Limit], true
	}
	if page.Keys == nil {
		page.Keys = []protocol.StateStoreKey{}
	}
	return jsonResponse(page)
}
