"""The quota queue: admits projects held back in phase Queued by their namespace's ResourceQuotas, and keeps the
quotas' usage counted from a snapshot (`reconciler`), run by `cara-controller-manager --controllers queue`."""
