"""Host data onto the device: the copy a new tensor holds, with torch's default dtypes.

Both a new tensor and a host array met as an operand (``t + np.ones(3)``) come through here, so
that they copy and type the data alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.runtime import faults, transfers
from harness.runtime.device_data import DeviceData


def from_host(data: Any, dtype: Any = None) -> DeviceData:
    """``data`` (anything ``np.array`` takes) as device data (float64 becomes float32 and int64
    int32, as in torch).

    A copy, always: XLA on CPU may adopt a suitably aligned host buffer without copying it, and
    the caller writing its array afterwards must not change the tensor (as ``torch.tensor``
    copies)."""
    if faults.active(faults.HOST_ALIASING):  # the caller's buffer goes to the device as it is
        host = np.asarray(data, dtype=dtype)
    else:
        host = np.array(data, dtype=dtype)
    if dtype is None and host.dtype == np.float64:
        host = host.astype(np.float32)
    if dtype is None and host.dtype == np.int64:
        host = host.astype(np.int32)
    return transfers.to_device(host)
