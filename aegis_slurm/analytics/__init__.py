"""Reliability analytics: pure functions over the job-run table (``accounting/schema.py``).

Modules (each metric names its formula and source in its docstring):

* ``attribution`` – which runs are infrastructure failures, and which evidence said so;
* ``taxonomy`` – runs and GPU-hours per end state (HPCA'25 Fig. 3);
* ``failure_rate`` – r_f per node-day, rolling series, causes (HPCA'25 §V);
* ``mttf`` – MTTF by GPU bucket with exact Poisson / Gamma intervals, projections (Fig. 7);
* ``ettr`` – E[ETTR] closed forms and the vectorized Monte Carlo (§V, spec §1);
* ``checkpoint`` – Young, Daly, E[ETTR] optimum, inverse solvers, r_f × Δt grid (spec §5);
* ``goodput`` – first/second-order goodput lost and preemption linkage (Fig. 8, spec §3);
* ``loops`` – crash loops (spec §3.3); ``lemon`` – lemon nodes (spec §4);
* ``job_runs`` – job-run linkage, measured ETTR (Fig. 9), job-size distribution (Fig. 6).
"""
