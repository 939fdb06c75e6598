package iothub

import (
	"context"
	"errors"

	twincli "github.com/smartgo/smartgo/client/twin"
)

// A deleted identity's MQTT session ends with it (docs/durability.md).

// deleteDevice deletes a device identity with its modules (ifMatch as for
// twincli.Client.DeleteDevice) and ends their sessions (endSession). The
// modules are listed first: the delete takes them with it; a failure to
// list them leaves their sessions to expire.
func (h *Hub) deleteDevice(ctx context.Context, deviceID, ifMatch string) error {
	mods, err := h.twins.ListModules(ctx, deviceID)
	if err != nil && !errors.Is(err, twincli.ErrNotFound) {
		h.log.Debug("iothub: modules of a device to delete", "device", deviceID, "err", err)
	}
	if err := h.twins.DeleteDevice(ctx, deviceID, ifMatch); err != nil {
		return err
	}
	h.endSession(ctx, deviceID)
	for _, m := range mods {
		h.endSession(ctx, Identity{DeviceID: deviceID, ModuleID: m.ModuleID}.ClientID())
	}
	return nil
}

// endRevoked ends the offline session inst that a revoked connection of
// id, for the identity generation gen ("": unknown), left on this node,
// as its expiry would (its delete stored), when the identity was deleted
// (gone, or created again since: another generation), not disabled: a
// disabled device keeps its session and queue, as does one the registry
// cannot tell of. Only that session of this node's: announced to every
// node, the end could take the session of an identity created again
// away.
func (h *Hub) endRevoked(ctx context.Context, id Identity, gen string, inst uint64) {
	cur, _, err := h.identityState(ctx, id)
	deleted := errors.Is(err, twincli.ErrNotFound) || err == nil && gen != "" && cur != "" && cur != gen
	if deleted && h.srv.SessionInstance(id.ClientID()) == inst && h.srv.EndOfflineSession(id.ClientID()) {
		h.log.Debug("iothub: deleted identity's session ended", "device", id.String())
	}
}

// endSession ends the MQTT session of clientID, whose identity was
// deleted, on every node (bridge.Backend.EndSession), with the messages
// queued in it: as IoT Hub drops a deleted identity's cloud-to-device
// queue, so that a device of the same id, connecting again once an
// identity is created for it (or registered at connect, AuthNone), does
// not resume it. The node serving the delete runs it (rest_handlers.go,
// rest_bulk.go); a session connected there is ended by the node whose
// connection of the identity it closed (revoke), once that connection
// ended (endRevoked). A failure is logged: the session then ends at its
// expiry, or when an identity of the same id is created (prepareC2D).
func (h *Hub) endSession(ctx context.Context, clientID string) {
	ended, err := h.br.Backend().EndSession(ctx, clientID)
	switch {
	case err != nil:
		h.log.Warn("iothub: end a deleted identity's session", "device", clientID, "err", err)
	case ended:
		h.log.Debug("iothub: deleted identity's session ended", "device", clientID)
	}
}

// endUnregistered ends the session of clientID, a development-mode
// device connecting whose identity the registry does not hold (register
// creates it once connected), when its latest session record names an
// owner (bridge.Backend.SessionOwner): the identity a connection of it
// authenticated as, or a prepare was made for, existed then and has been
// deleted since, by whatever path (the REST API ends the session at
// once; the state store's twin client directly, `smartgo admin`, does
// not). The device then starts clean, as after a delete through the
// REST API, and the messages queued for the deleted identity are
// dropped. A session naming no owner is kept: one prepared for messages
// sent to the id before any identity existed, or written by an earlier
// version. It runs before the connect looks for a session to resume.
func (h *Hub) endUnregistered(ctx context.Context, clientID string) {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	owner, err := h.br.Backend().SessionOwner(rctx, clientID)
	if err != nil {
		h.log.Warn("iothub: owner of an unregistered device's session", "device", clientID, "err", err)
	}
	if owner != "" {
		h.endSession(rctx, clientID)
	}
}

// identityState reads the registry's generation id and connection state
// of the identity id (a device or a module).
func (h *Hub) identityState(ctx context.Context, id Identity) (generation, connectionState string, err error) {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	if id.ModuleID == "" {
		d, err := h.twins.GetDevice(rctx, id.DeviceID)
		if err != nil {
			return "", "", err
		}
		return d.GenerationID, d.ConnectionState, nil
	}
	m, err := h.twins.GetModule(rctx, id.DeviceID, id.ModuleID)
	if err != nil {
		return "", "", err
	}
	return m.GenerationID, m.ConnectionState, nil
}
