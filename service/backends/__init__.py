"""The adapters to the cluster that runs jobs: `ray_backend.py` (the only module that talks
to Ray, through its Job Submission API) and `kuberay_backend.py` (KubeRay RayJobs on Kubernetes).
"""
