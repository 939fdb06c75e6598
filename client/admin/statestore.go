package admin

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// StateStoreKey is one state store key with its value (cut to the
// query's MaxValue; Size is the whole value's) and version.
type StateStoreKey = protocol.StateStoreKey

// MaxStateStoreLimit is the largest page of a state store key listing.
const MaxStateStoreLimit = protocol.MaxStateStoreScanLimit

// StateStoreQuery selects a page of state store keys: those starting with
// Prefix, after After in byte order, at most Limit (0: 100; at most
// MaxStateStoreLimit); values cut to MaxValue bytes (0: 1024).
type StateStoreQuery struct {
	Prefix, After []byte
	Limit         int
	MaxValue      int
}

// StateStoreKeyPage is a page of keys in byte order; More is set when
// keys follow (ask again with After set to the last key).
type StateStoreKeyPage struct {
	Keys []StateStoreKey `json:"keys"`
	More bool            `json:"more"`
}

// StateStoreKeys lists state store keys from every master broker's shards
// (STATESTORE_SCAN), merged in byte order.
func (a *Admin) StateStoreKeys(ctx context.Context, q StateStoreQuery) (*StateStoreKeyPage, error) {
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 0 || q.Limit > MaxStateStoreLimit {
		return nil, fmt.Errorf("%w: limit %d outside 1..%d", client.ErrBadOptions, q.Limit, MaxStateStoreLimit)
	}
	if q.MaxValue < 0 {
		return nil, fmt.Errorf("%w: negative MaxValue", client.ErrBadOptions)
	}
	masters, err := a.Masters(ctx, "")
	if err != nil {
		return nil, err
	}
	body, err := protocol.EncodeJSON(protocol.StateStoreScanRequest{Prefix: q.Prefix, After: q.After, Limit: q.Limit, MaxValue: q.MaxValue})
	if err != nil {
		return nil, err
	}
	out := &StateStoreKeyPage{Keys: []StateStoreKey{}}
	for _, m := range masters {
		resp, err := a.invoke(ctx, "state store scan", m.Addr, protocol.NewRequest(protocol.StateStoreScan, nil, body))
		if err != nil {
			return nil, err
		}
		if resp.Code == protocol.RequestCodeNotSupported {
			continue // a broker without a state store
		}
		if resp.Code != protocol.Success {
			return nil, &client.BrokerError{Addr: m.Addr, Op: "state store scan", Code: resp.Code, Remark: resp.Remark}
		}
		var p protocol.StateStoreScanPage
		if err := protocol.DecodeJSON(resp.Body, &p); err != nil {
			return nil, fmt.Errorf("admin: state store scan: %w", err)
		}
		out.Keys = append(out.Keys, p.Keys...)
		out.More = out.More || p.More
	}
	slices.SortFunc(out.Keys, func(x, y StateStoreKey) int { return bytes.Compare(x.Key, y.Key) })
	if len(out.Keys) > q.Limit {
		out.Keys, out.More = out.Keys[:q.Limit], true
	}
	return out, nil
}
