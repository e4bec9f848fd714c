package testpg

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestServer(t *testing.T) {
	Require(t)
	srv, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the database's own cleanup.
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(srv.Dir); !os.IsNotExist(err) {
			t.Errorf("after Stop, stat %s: %v; want it removed", srv.Dir, err)
		}
	})
	ctx := context.Background()
	u := srv.NewDatabase(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version_num").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v < "150000" {
		t.Errorf("server_version_num %s; want 15 or newer", v)
	}
	var sync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if sync != "off" {
		t.Errorf("fsync %s; want off without Options.Durable", sync)
	}
}
