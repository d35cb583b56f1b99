package console

import (
	"net/http"
)

type healthView struct {
	Health
	Fenced []string
}

// health shows Redis and PostgreSQL reachability, the fenced SKUs (held
// until verified after a Redis restart), dead letters, the projector's lag
// per partition and the durability mode.
func (c *Console) health(w http.ResponseWriter, r *http.Request, s session) {
	v := healthView{Health: c.cfg.Health(r.Context())}
	if v.Postgres {
		// The page still shows the rest when the list cannot be read.
		all, _, err := c.allSKUs(r.Context(), s)
		if err != nil {
			c.cfg.Logger.WarnContext(r.Context(), "console: health: SKU list", "err", err)
		}
		for _, it := range all {
			if it.State == "recovering" {
				v.Fenced = append(v.Fenced, it.SKU)
			}
		}
	}
	c.render(w, r, http.StatusOK, "health", s, v)
}
