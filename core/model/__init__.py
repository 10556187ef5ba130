"""A loaded model version and its request path: from a checked request to its assembled response.

:mod:`.model` (the :class:`~.model.Model` served by worker processes), :mod:`.servable` (what
every served version offers), :mod:`.validation` and :mod:`.reshape` (a request against the
config), :mod:`.input_staging` (inputs into shared memory), :mod:`.batching`,
:mod:`.response_assembly` and :mod:`.classification` (outputs), :mod:`.instance`,
:mod:`.instance_groups` and :mod:`.devices` (its instances and where they run), :mod:`.launch`
(starting a version's instances), :mod:`.warmup` and :mod:`.bls` (model code calling models).
"""
