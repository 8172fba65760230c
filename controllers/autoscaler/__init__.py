"""The cluster autoscaler (`cara-autoscaler`): node groups that grow when projects cannot fit and shrink when
nodes sit idle (docs/autoscaling.md).

Pure logic, tested with tables: `settings` (a group's spec as values, its template node), `simulation` (which
Pending projects fit on new nodes of which group, with the scheduler's own filters), `expanders` (least-waste,
priority, random), `scaledown` (utilisation, safety). Steps of a pass: `bookkeeping`, `scaleup`, `removal`, over
`groupstatus` (the status writes, recorded before they are acted on) and `providers` (exec, gRPC). `reconciler`
runs a pass; `app` wires it; `__main__` is the process.
"""
