"""How acode's processes reach each other, below the messages they send.

The multipart frame layout between clients, the broker and workers (``frames``) and the
spec a supervised child receives on its command line (``spec``). These modules build on
:mod:`protocol.errors` and :mod:`protocol.basics` only; what travels inside the frames is
:mod:`protocol.messages`, encoded by :mod:`protocol.codec`.
"""
