"""A replica across nodes, seen from inside its pods (docs/multi-node.md): each pod of the group's
Indexed Job is one rank (its completion index). `jobrunner resolve-leader` (an init container) writes
the leader's IP for the server's --dist-init-addr; `jobrunner rank` (the main container) runs
`jobrunner generate` on rank 0 and, on the other ranks, follows the group until the leader's work is
done (exit 0) or the group is lost (non-zero, which fails the Job: the operator starts the group
again)."""
