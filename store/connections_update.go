package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// UpdateConnectionAddress moves a connection to a new host and port, and
// re-pins its host keys when hostKeys is not empty (an empty hostKeys keeps
// the pins). The sealed key, grants and approvals stay: the connection is
// the same target reached at another address. `postern demo` needs it
// because its demo target listens on a new random port at every run; an admin
// moving a server to a new address needs it too.
func (s *Store) UpdateConnectionAddress(ctx context.Context, alias, host string, port int, hostKeys []string) (*Connection, error) {
	if host == "" || strings.ContainsAny(host, " \t\r\n/@") {
		return nil, invalid("connection %s: host %q is not a host name or address", alias, host)
	}
	if port == 0 {
		port = DefaultSSHPort
	}
	if port < 1 || port > 65535 {
		return nil, invalid("connection %s: port %d out of range 1-65535", alias, port)
	}
	var pins []string
	for _, l := range hostKeys {
		norm, _, err := ParseHostKeyLine(l)
		if err != nil {
			return nil, fmt.Errorf("store: connection %s: %w", alias, err)
		}
		pins = append(pins, norm)
	}
	now := formatTime(s.nowUTC())
	var id string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if id, err = connectionIDByAlias(ctx, tx, alias); err != nil {
			return err
		}
		if len(pins) > 0 {
			_, err = tx.ExecContext(ctx, `
				UPDATE connections SET host = ?, port = ?, host_keys = ?, modified_at = ? WHERE id = ?`,
				host, port, strings.Join(pins, "\n"), now, id)
		} else {
			_, err = tx.ExecContext(ctx, `
				UPDATE connections SET host = ?, port = ?, modified_at = ? WHERE id = ?`,
				host, port, now, id)
		}
		if err != nil {
			return fmt.Errorf("store: update connection %s: %w", alias, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.ConnectionByID(ctx, id)
}
