"""The machinery behind :mod:`kubereflector.models.crd` (private): ``markers`` (the
``Annotated`` markers), ``errors`` (:class:`StructuralSchemaError`), ``docs`` (descriptions
read from the source), ``schema`` (Python types to a structural schema), ``rules`` (kube's
rules over the result) and ``paths`` (printer columns and the scale subresource against
the schema). ``markers`` and ``errors`` load with the declarations; the rest on the first
schema built."""
