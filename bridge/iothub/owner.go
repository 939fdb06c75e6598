package iothub

import "context"

// Owners of device client ids.
//
// Each session record a connection writes names the generation id of the
// device identity the connection was for (bridge.Backend.SetOwnerTag: the
// record's "owner"), so that prepareC2D tells a session a deleted
// identity's connection left from one of the new identity of the same id
// by that tag, not by comparing when it ended (the clock of the node it
// was on) with the identity's creation (the twin engine's clock), and
// whether or not the connection had a user name. The generation is noted
// at CONNECT: a device's from the registry read that authenticates it (in
// development mode read then, or noted when register creates the
// identity); a client that connects with a device's id and no user name
// (left to the server's own rules, it receives that device's
// cloud-to-device messages once subscribed) gets the generation of the
// identity of its id, if one exists, read then. Only anonymous clients
// whose id is a valid device id pay that read. A connection's records
// carry the generation noted at its client id's latest CONNECT on this
// node; none when the registry could not say (the record is then judged
// by when it ended, as an earlier version's).

// ownerTag is bridge.Backend.SetOwnerTag's function.
func (h *Hub) ownerTag(clientID string) string {
	if v, ok := h.owners.Load(clientID); ok {
		return v.(string)
	}
	return ""
}

// noteOwner notes the generation of the identity clientID's connect was
// for ("": unknown).
func (h *Hub) noteOwner(clientID, gen string) {
	if gen == "" {
		h.owners.Delete(clientID)
		return
	}
	h.owners.Store(clientID, gen)
}

// noteAnonymous notes the owner of a client that connects without a user
// name: the identity its client id names, if any.
func (h *Hub) noteAnonymous(clientID string) {
	id, ok := ParseClientID(clientID)
	if !ok || id.ModuleID != "" || !h.started.Load() {
		return
	}
	h.noteOwner(clientID, h.generation(context.Background(), id.DeviceID))
}
