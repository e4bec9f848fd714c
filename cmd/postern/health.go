package main

import (
	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
)

// watchHealth registers postern_build_info and the database and
// notification queue gauges (metrics.WatchHealth), each scrape's database
// work bounded like the read sandbox gauge's.
func watchHealth(m *metrics.Metrics, st *store.Store) error {
	v := readBuildVersion()
	if err := m.BuildInfo(v.Version, v.Commit, v.Go); err != nil {
		return err
	}
	return m.WatchHealth(metrics.Health{Ping: st.Ping, Pool: st.Stats, NotificationsQueued: st.NotificationsQueued,
		Timeout: scrapeReadTimeout})
}
