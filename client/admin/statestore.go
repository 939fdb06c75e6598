package admin

import (
	"bytes"
	"context"
	"errors"
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

// StateStoreKeys lists state store keys from every broker group's shards
// (STATESTORE_SCAN to its master, or to its slave, which holds a replica,
// while it has none: see Readers), merged in byte order. Broker groups
// that do not answer leave their keys out: the page then comes with an
// ErrPartial error naming them (an error alone when none answered).
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
	readers, err := a.Readers(ctx)
	if err != nil {
		return nil, err
	}
	body, err := protocol.EncodeJSON(protocol.StateStoreScanRequest{Prefix: q.Prefix, After: q.After, Limit: q.Limit, MaxValue: q.MaxValue})
	if err != nil {
		return nil, err
	}
	out := &StateStoreKeyPage{Keys: []StateStoreKey{}}
	perr := a.fromEach(ctx, "state store scan", readers, func() *protocol.Command {
		return protocol.NewRequest(protocol.StateStoreScan, nil, body)
	}, func(m Broker, resp *protocol.Command) error {
		if resp.Code == protocol.RequestCodeNotSupported {
			return nil // a broker without a state store
		}
		if err := okAnswer("state store scan", m.Addr, resp); err != nil {
			return err
		}
		var p protocol.StateStoreScanPage
		if err := protocol.DecodeJSON(resp.Body, &p); err != nil {
			return fmt.Errorf("admin: state store scan: %w", err)
		}
		out.Keys = append(out.Keys, p.Keys...)
		out.More = out.More || p.More
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	slices.SortFunc(out.Keys, func(x, y StateStoreKey) int { return bytes.Compare(x.Key, y.Key) })
	if len(out.Keys) > q.Limit {
		out.Keys, out.More = out.Keys[:q.Limit], true
	}
	return out, perr
}
