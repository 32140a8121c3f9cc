"""The straight-through estimators that train a JumpReLU SAE (Rajamanoharan et al. 2024, as sae-lens trains it).

The JumpReLU z = pre H(pre - theta) and the step H(pre - theta) (whose sum over latents is the L0) have zero
derivative in theta almost everywhere. In the backward pass theta gets the derivative of the rectangle-kernel
estimate of H instead, with bandwidth eps, K(u) = 1 for |u| < 1/2, else 0:

    d z_i / d theta_i ~ -(theta_i / eps) K((pre_i - theta_i) / eps)
    d H_i / d theta_i ~ -(1 / eps) K((pre_i - theta_i) / eps)

(summed over the batch); the pre-activations get the ordinary gradient of z (H(pre - theta)) and none from H, so
the L0 penalty moves only the thresholds.
"""

from __future__ import annotations

import torch


def rectangle(u: torch.Tensor) -> torch.Tensor:
    """K(u): 1 on (-1/2, 1/2), else 0."""
    return ((u > -0.5) & (u < 0.5)).to(u)


class _JumpReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pre, threshold, bandwidth):
        ctx.save_for_backward(pre, threshold)
        ctx.bandwidth = bandwidth
        return pre * (pre > threshold)

    @staticmethod
    def backward(ctx, grad):
        pre, threshold = ctx.saved_tensors
        eps = ctx.bandwidth
        grad_pre = (pre > threshold) * grad
        grad_theta = (-(threshold / eps) * rectangle((pre - threshold) / eps) * grad).sum(0)
        return grad_pre, grad_theta, None


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pre, threshold, bandwidth):
        ctx.save_for_backward(pre, threshold)
        ctx.bandwidth = bandwidth
        return (pre > threshold).to(pre)

    @staticmethod
    def backward(ctx, grad):
        pre, threshold = ctx.saved_tensors
        eps = ctx.bandwidth
        return None, (-(1.0 / eps) * rectangle((pre - threshold) / eps) * grad).sum(0), None


def jumprelu(pre: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """(n, m) pre H(pre - theta), with the straight-through gradient for theta (m,)."""
    return _JumpReLU.apply(pre, threshold, bandwidth)


def step(pre: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
    """(n, m) H(pre - theta), with the straight-through gradient for theta (m,) only."""
    return _Step.apply(pre, threshold, bandwidth)
