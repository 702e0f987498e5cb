import sys

from draftgen_dev.cluster.kubelet.kubelet import main

sys.exit(main())
