package iothub

import (
	"context"
	"time"

	"github.com/smartgo/smartgo/mqtt"
)

// Owners of device client ids.
//
// Each session record a connection writes names the generation id of the
// device identity the connection was for (bridge.Backend.SetOwnerTag: the
// record's "owner"; a module's connection, the module's own), so that a
// connect of an identity created again resumes none of them (the bridge's
// LoadSession, and the MQTT server for a session it holds in memory, compare
// the owners), and prepareC2D tells a session a deleted
// identity's connection left from one of the new identity of the same id
// by that tag, not by comparing when it ended (the clock of the node it
// was on) with the identity's creation (the twin engine's clock), and
// whether or not the connection had a user name. The generation is noted
// at CONNECT: a device's from the registry read that authenticates it (in
// development mode read then, or noted when register creates the
// identity); a client that connects with a device's id and no user name
// (left to the server's own rules, it receives that device's
// cloud-to-device messages once subscribed) gets the generation of the
// identity of its id, if one exists, read then (only when its session
// may outlast the connection, and at most once per ownerReuse: below). A
// connection's records
// carry the generation noted at its client id's latest CONNECT on this
// node; none when the registry could not say (the record is then judged
// by when it ended, as an earlier version's).

// An owner is noted at each CONNECT and read as the connection's records
// are written, so an entry must outlast the connection while its session
// may still write records: the hub drops it (pruneOwners, every
// ownerPruneEvery) once this node's MQTT server holds no session of the
// client id and the note is older than ownerGrace, at least twice the
// server's SessionLoadTimeout (a CONNECT between its authentication and
// its session's installation is not robbed of it).
// The map is so bounded by the sessions the node holds plus the
// connects of the last ownerGrace: devices that left with their session,
// identities deleted (their sessions end), anonymous clients.
//
// A client with no user name whose session ends with its connection
// (mqtt.ConnectRequest.Transient: clean start, no session expiry) resumes
// nothing and leaves no record: it pays no registry read, and any owner
// noted for its id is dropped. One that reconnects within ownerReuse of
// its last read keeps that read's generation (a reconnect storm costs
// one read per client, not per CONNECT): an identity deleted and created
// again within that window leaves its records naming the deleted one's
// generation, so a prepare for the new one replaces that session, as it
// would have an hour later.
const (
	ownerPruneEvery = 30 * time.Second
	ownerGrace      = 2 * time.Minute
	ownerReuse      = 10 * time.Second
)

// ownerNote is an entry of Hub.owners.
type ownerNote struct {
	gen  string
	at   time.Time
	read bool // noted by noteAnonymous's registry read
}

// ownerTag is bridge.Backend.SetOwnerTag's function.
func (h *Hub) ownerTag(clientID string) string {
	if v, ok := h.owners.Load(clientID); ok {
		return v.(ownerNote).gen
	}
	return ""
}

// noteOwner notes the generation of the identity clientID's connect was
// for ("": unknown).
func (h *Hub) noteOwner(clientID, gen string) {
	h.storeOwner(clientID, gen, false)
}

func (h *Hub) storeOwner(clientID, gen string, read bool) {
	if gen == "" {
		h.owners.Delete(clientID)
		return
	}
	h.owners.Store(clientID, ownerNote{gen: gen, at: time.Now(), read: read})
}

// noteAnonymous notes the owner of a client that connects without a user
// name: the identity its client id names, if any.
func (h *Hub) noteAnonymous(r *mqtt.ConnectRequest) {
	id, ok := ParseClientID(r.ClientID)
	if !ok || id.ModuleID != "" || !h.started.Load() {
		return
	}
	if r.Transient {
		h.owners.Delete(r.ClientID)
		return
	}
	if v, ok := h.owners.Load(r.ClientID); ok {
		if n := v.(ownerNote); n.read && time.Since(n.at) < h.ownerReuse {
			return
		}
	}
	h.stats.OwnerReads.Add(1)
	h.storeOwner(r.ClientID, h.generation(context.Background(), id.DeviceID), true)
}

// pruneOwners drops the owners of client ids whose sessions this node no
// longer holds, noted before now less ownerGrace.
func (h *Hub) pruneOwners(now time.Time) {
	if h.srv == nil {
		return
	}
	h.owners.Range(func(k, v any) bool {
		if n := v.(ownerNote); now.Sub(n.at) >= h.ownerGrace && h.srv.SessionInstance(k.(string)) == 0 {
			h.owners.CompareAndDelete(k, v)
		}
		return true
	})
}
